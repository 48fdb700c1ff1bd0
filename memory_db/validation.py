"""What the store accepts. Every write (a new memory, an edit, an undo, an import line or history
snapshot) passes the same checks, so no path can store a value that another path could not read."""
from __future__ import annotations

import math
import uuid
from datetime import datetime, timezone
from typing import Any

from .errors import InvalidMemoryError
from .records import MAX_SUMMARY_WORDS, MODALITIES, QUESTION_TYPES, Memory, NewMemory, modality_for

MAX_NAMESPACE_LENGTH = 200
MAX_COUNT = 2**31 - 1  # the counters are 32-bit INTEGER columns on every backend
MAX_JSON_DEPTH = 32
MAX_JSON_INTEGER = 2**63 - 1


def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not namespace.strip() or len(namespace) > MAX_NAMESPACE_LENGTH:
        raise InvalidMemoryError(
            f"Namespace {namespace!r} is not valid; use a non-empty string of at most "
            f"{MAX_NAMESPACE_LENGTH} characters (e.g. the user's name)."
        )
    return namespace


def check_question_type(question_type: str) -> str:
    if question_type not in QUESTION_TYPES:
        raise InvalidMemoryError(
            f"Question type {question_type!r:.40} is unknown; use one of: {', '.join(QUESTION_TYPES)}."
        )
    return question_type


def _check_storable(name: str, value: str) -> None:
    if "\x00" in value:  # PostgreSQL cannot store NUL in text; refuse it everywhere alike
        raise InvalidMemoryError(f"Field {name!r} contains a NUL character; remove it and try again.")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidMemoryError(
            f"Field {name!r} contains a lone UTF-16 surrogate, which no database can store; remove it."
        ) from None


def check_text(name: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise InvalidMemoryError(f"Field {name!r} must be a non-empty string, got {value!r:.80}.")
    _check_storable(name, value)
    return value


def check_summary(summary: Any) -> str:
    check_text("summary", summary)
    words = len(summary.split())
    if words > MAX_SUMMARY_WORDS:
        raise InvalidMemoryError(
            f"The workflow summary has {words} words; shorten it to at most {MAX_SUMMARY_WORDS}."
        )
    return summary


def check_flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise InvalidMemoryError(f"Field {name!r} must be true or false, got {value!r:.40}.")
    return value


def check_count(name: str, value: Any, *, minimum: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not minimum <= value <= MAX_COUNT:
        shown = f"a {len(str(value))}-digit number" if isinstance(value, int) and value > MAX_COUNT else repr(value)
        raise InvalidMemoryError(f"Field {name!r} must be an integer from {minimum} to {MAX_COUNT}, got {shown:.60}.")
    return value


def check_scoring_weights(similarity_weight: Any, win_rate_weight: Any, caption_weight: Any) -> None:
    """A search's scoring weights: finite, non-negative, not both score weights 0, caption in [0, 1]."""
    for name, value in (("similarity_weight", similarity_weight), ("win_rate_weight", win_rate_weight),
                        ("caption_weight", caption_weight)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
            raise InvalidMemoryError(f"{name} must be a finite number >= 0, got {value!r:.40}.")
    if similarity_weight == 0 and win_rate_weight == 0:
        raise InvalidMemoryError("similarity_weight and win_rate_weight are both 0; at least one must be positive.")
    if caption_weight > 1:
        raise InvalidMemoryError(f"caption_weight must be from 0 to 1, got {caption_weight!r}.")


def check_counts(usage: Any, success: Any) -> tuple[int, int]:
    check_count("usage_count", usage, minimum=1)
    check_count("success_count", success, minimum=0)
    if success > usage:
        raise InvalidMemoryError(f"Counts must satisfy 0 <= success_count <= usage_count and usage_count >= 1, "
                                 f"got {success}/{usage}.")
    return usage, success


def check_memory_id(memory_id: Any) -> str:
    try:
        if not isinstance(memory_id, str) or str(uuid.UUID(memory_id)) != memory_id.lower():
            raise ValueError
    except ValueError:
        raise InvalidMemoryError(f"Field 'id' must be a UUID such as {uuid.uuid4()}, got {memory_id!r:.40}.") from None
    return memory_id


def check_timestamp(name: str, moment: Any) -> datetime:
    """An aware datetime that converts to UTC (a year-1 time at +14:00 does not)."""
    if not isinstance(moment, datetime) or moment.tzinfo is None:
        raise InvalidMemoryError(f"Field {name!r} must be a timestamp with a time zone, got {moment!r:.60}.")
    try:
        return moment.astimezone(timezone.utc)
    except OverflowError:
        raise InvalidMemoryError(
            f"Field {name!r} ({moment.isoformat()}) lies outside the years 1 to 9999 once converted to UTC."
        ) from None


def check_json_value(name: str, value: Any) -> Any:
    """A value that every backend stores as JSON and reads back equal: objects with string keys,
    arrays, storable strings, finite numbers, booleans and null, at most MAX_JSON_DEPTH deep."""
    pending = [(value, name, 1)]
    while pending:
        item, path, depth = pending.pop()
        if depth > MAX_JSON_DEPTH:
            raise InvalidMemoryError(f"Field {path!r:.120} is nested deeper than {MAX_JSON_DEPTH} levels; flatten it.")
        if isinstance(item, dict):
            for key, inner in item.items():
                if not isinstance(key, str):
                    raise InvalidMemoryError(f"Field {path!r:.120} has a key {key!r:.40} that is not a string.")
                _check_storable(f"{path}.{key}", key)
                pending.append((inner, f"{path}.{key}", depth + 1))
        elif isinstance(item, list):
            pending.extend((inner, f"{path}[{i}]", depth + 1) for i, inner in enumerate(item))
        elif isinstance(item, str):
            _check_storable(path, item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_JSON_INTEGER:
                raise InvalidMemoryError(f"Field {path!r:.120} holds an integer beyond 64 bits; store it as a string.")
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidMemoryError(f"Field {path!r:.120} holds {item}, which JSON cannot store.")
        else:
            raise InvalidMemoryError(
                f"Provenance must be JSON-serialisable: field {path!r:.120} holds {item!r:.60}.")
    return value


def check_provenance(provenance: Any) -> dict:
    if not isinstance(provenance, dict):
        raise InvalidMemoryError(f"Provenance must be a dict (JSON object), got {type(provenance).__name__}.")
    return check_json_value("provenance", provenance)


def check_caption_and_modality(caption: Any, modality: Any) -> None:
    if caption is not None:
        check_text("caption", caption)
    if modality not in MODALITIES or modality != modality_for(caption):
        raise InvalidMemoryError(
            f"Field 'modality' is {modality!r:.40} but the caption makes it {modality_for(caption)!r}.")


def check_new_memory(new: NewMemory) -> None:
    check_namespace(new.namespace)
    check_text("question", new.question)
    check_summary(new.summary)
    check_text("plan", new.plan, allow_empty=True)
    check_flag("correct", new.correct)
    if new.caption is not None:
        check_text("caption", new.caption)
    check_question_type(new.question_type)
    check_provenance(new.provenance)


def check_memory(memory: Memory, namespace: str) -> Memory:
    """A whole memory about to be written into `namespace`: the checks of a new memory, and of
    the fields a new memory does not have (id, counters, pin, timestamps)."""
    check_namespace(namespace)
    if memory.namespace != namespace:
        raise InvalidMemoryError(
            f"Memory {memory.id!r:.40} belongs to namespace {memory.namespace!r:.40}, not {namespace!r:.40}; "
            "a memory is only ever written into the namespace it is asked for in.")
    check_memory_id(memory.id)
    check_text("question", memory.question)
    check_caption_and_modality(memory.caption, memory.modality)
    check_summary(memory.summary)
    check_text("plan", memory.plan, allow_empty=True)
    check_flag("correct", memory.correct)
    check_flag("pinned", memory.pinned)
    check_question_type(memory.question_type)
    check_counts(memory.usage_count, memory.success_count)
    check_provenance(memory.provenance)
    check_timestamp("created_at", memory.created_at)
    check_timestamp("updated_at", memory.updated_at)
    return memory
