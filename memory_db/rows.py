"""Conversions between database rows, Memory records and JSON snapshots; input validation."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .embedder import EMBEDDING_DIM
from .errors import InvalidMemoryError
from .records import MAX_SUMMARY_WORDS, QUESTION_TYPES, Memory, NewMemory
from .schema import memories

MAX_NAMESPACE_LENGTH = 200
# Every column but the embeddings: what get/list/search read back.
MEMORY_COLUMNS = [c for c in memories.c if c.name not in ("question_embedding", "caption_embedding")]
CONTENT_FIELDS = ("question", "caption", "summary", "plan", "correct", "question_type", "pinned", "provenance")
COUNTER_FIELDS = ("usage_count", "success_count")


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def to_db_time(moment: datetime) -> datetime:
    """The database keeps naive UTC (SQLite has no time zones)."""
    if moment.tzinfo is None:
        raise InvalidMemoryError(f"Timestamp {moment.isoformat()} has no time zone; give an aware datetime.")
    return moment.astimezone(timezone.utc).replace(tzinfo=None)


def from_db_time(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment.astimezone(timezone.utc)


def memory_from_row(row: Any) -> Memory:
    return Memory(
        id=row.id, namespace=row.namespace, question=row.question, caption=row.caption,
        summary=row.summary, plan=row.plan, correct=bool(row.correct),
        question_type=row.question_type, modality=row.modality,
        usage_count=int(row.usage_count), success_count=int(row.success_count),
        win_rate=int(row.success_count) / max(int(row.usage_count), 1), pinned=bool(row.pinned),
        provenance=dict(row.provenance or {}),
        created_at=from_db_time(row.created_at), updated_at=from_db_time(row.updated_at),
    )


def row_values(memory: Memory) -> dict[str, Any]:
    """Column values of `memory` (without embeddings and row id)."""
    return {
        "id": memory.id, "namespace": memory.namespace, "question": memory.question,
        "caption": memory.caption, "summary": memory.summary, "plan": memory.plan,
        "correct": memory.correct, "question_type": memory.question_type, "modality": memory.modality,
        "usage_count": memory.usage_count, "success_count": memory.success_count,
        "pinned": memory.pinned, "provenance": memory.provenance,
        "created_at": to_db_time(memory.created_at), "updated_at": to_db_time(memory.updated_at),
    }


def memory_from_json(data: dict[str, Any]) -> Memory:
    """Inverse of Memory.to_json_dict (used by undo and import; input already validated)."""
    return Memory(
        id=data["id"], namespace=data["namespace"], question=data["question"],
        caption=data["caption"], summary=data["summary"], plan=data["plan"],
        correct=data["correct"], question_type=data["question_type"], modality=data["modality"],
        usage_count=data["usage_count"], success_count=data["success_count"],
        win_rate=data["success_count"] / max(data["usage_count"], 1), pinned=data["pinned"],
        provenance=data["provenance"],
        created_at=from_db_time(datetime.fromisoformat(data["created_at"])),
        updated_at=from_db_time(datetime.fromisoformat(data["updated_at"])),
    )


def vector_to_bytes(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def vectors_from_bytes(blobs: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, EMBEDDING_DIM)


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
            f"Question type {question_type!r} is unknown; use one of: {', '.join(QUESTION_TYPES)}."
        )
    return question_type


def check_text(name: str, value: Any, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise InvalidMemoryError(f"Field {name!r} must be a non-empty string, got {value!r:.80}.")
    if "\x00" in value:  # PostgreSQL cannot store NUL in text; refuse it everywhere alike
        raise InvalidMemoryError(f"Field {name!r} contains a NUL character; remove it and try again.")
    return value


def check_summary(summary: Any) -> str:
    check_text("summary", summary)
    words = len(summary.split())
    if words > MAX_SUMMARY_WORDS:
        raise InvalidMemoryError(
            f"The workflow summary has {words} words; shorten it to at most {MAX_SUMMARY_WORDS}."
        )
    return summary


def check_provenance(provenance: Any) -> dict:
    if not isinstance(provenance, dict):
        raise InvalidMemoryError(f"Provenance must be a dict (JSON object), got {type(provenance).__name__}.")
    try:
        json.dumps(provenance, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidMemoryError(f"Provenance must be JSON-serialisable: {exc}.") from exc
    return provenance


def check_new_memory(new: NewMemory) -> None:
    check_namespace(new.namespace)
    check_text("question", new.question)
    check_summary(new.summary)
    check_text("plan", new.plan, allow_empty=True)
    if not isinstance(new.correct, bool):
        raise InvalidMemoryError(f"Field 'correct' must be True or False, got {new.correct!r}.")
    if new.caption is not None:
        check_text("caption", new.caption)
    check_question_type(new.question_type)
    check_provenance(new.provenance)
