"""Memories from JSON objects (an import line, a history entry's before/after snapshot): every
field validated as a new memory is, the namespace always the caller's, never the object's own."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from .errors import InvalidMemoryError
from .records import Memory, modality_for
from .validation import (
    check_caption_and_modality,
    check_counts,
    check_flag,
    check_memory,
    check_memory_id,
    check_provenance,
    check_question_type,
    check_summary,
    check_text,
    check_timestamp,
)

MEMORY_FIELDS = frozenset({
    "id", "namespace", "question", "caption", "summary", "plan", "correct", "question_type", "modality",
    "usage_count", "success_count", "win_rate", "pinned", "provenance", "created_at", "updated_at",
})


def _timestamp(record: dict, name: str) -> datetime:
    value = record[name]
    if not isinstance(value, str):
        raise InvalidMemoryError(f"field {name!r} must be an ISO timestamp string, got {type(value).__name__}")
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise InvalidMemoryError(f"field {name!r} is not an ISO timestamp: {value!r:.40}") from None
    if moment.tzinfo is None:
        raise InvalidMemoryError(f"field {name!r} has no time zone: {value!r:.40}")
    return check_timestamp(name, moment)


def memory_from_record(record: dict[str, Any], *, namespace: str, now: datetime,
                       memory_id: str | None = None, complete: bool = False) -> Memory:
    """The memory `record` describes, for `namespace`. `memory_id`: the id it must have (a history
    snapshot must be of its entry's memory). `complete`: every field must be present (a snapshot);
    otherwise a hand-written line gets defaults (one use, one success, 'others', now)."""
    if not isinstance(record, dict):
        raise InvalidMemoryError(f"a memory must be a JSON object, got {type(record).__name__}")
    unknown = set(record) - MEMORY_FIELDS - {"type"}
    if unknown:
        raise InvalidMemoryError(f"unknown field(s) {', '.join(sorted(map(str, unknown)))[:200]}")
    if complete:
        missing = MEMORY_FIELDS - set(record)
        if missing:
            raise InvalidMemoryError(f"field(s) {', '.join(sorted(missing))} missing")
    for required in ("id", "question", "summary", "plan", "correct"):
        if required not in record:
            raise InvalidMemoryError(f"field {required!r} is missing")
    if not isinstance(record["correct"], bool):
        raise InvalidMemoryError(f"field 'correct' must be bool, got {type(record['correct']).__name__}")
    record_id = check_memory_id(record["id"])
    if memory_id is not None and record_id != memory_id:
        raise InvalidMemoryError(f"field 'id' ({record_id}) does not match the entry's memory_id ({memory_id})")
    caption = record.get("caption")
    modality = record.get("modality", modality_for(caption if isinstance(caption, str) else None))
    check_caption_and_modality(caption, modality)
    usage, success = check_counts(record.get("usage_count", 1), record.get("success_count", 1))
    created = _timestamp(record, "created_at") if "created_at" in record else now
    memory = Memory(
        id=record_id, namespace=namespace,
        question=check_text("question", record["question"]), caption=caption,
        summary=check_summary(record["summary"]), plan=check_text("plan", record["plan"], allow_empty=True),
        correct=record["correct"], question_type=check_question_type(record.get("question_type", "others")),
        modality=modality, usage_count=usage, success_count=success, win_rate=success / usage,
        pinned=check_flag("pinned", record.get("pinned", False)),
        provenance=check_provenance(record.get("provenance", {})),
        created_at=created, updated_at=_timestamp(record, "updated_at") if "updated_at" in record else created,
    )
    return check_memory(memory, namespace)
