"""Conversions between database rows and Memory records; what a stored row must hold to be read."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import numpy as np

from .embedder import EMBEDDING_DIM
from .errors import InvalidMemoryError, UnreadableMemoryError
from .records import MODALITIES, QUESTION_TYPES, Memory, modality_for
from .schema import memories

VECTOR_BYTES = 4 * EMBEDDING_DIM
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


def row_problem(row: Any) -> str | None:
    """Why a stored row cannot be read back as a Memory (rows written before every write path was
    validated may hold anything), or None. Only shapes that would break a reader are checked."""
    if row.question_type not in QUESTION_TYPES:
        return f"question type {row.question_type!r:.40} is unknown"
    if not all(isinstance(value, str) for value in (row.question, row.summary, row.plan)):
        return "its question, summary or plan is not text"
    if row.caption is not None and not isinstance(row.caption, str):
        return "its caption is not text"
    if row.modality not in MODALITIES or row.modality != modality_for(row.caption):
        return f"modality {row.modality!r:.40} does not match its caption"
    if not isinstance(row.provenance, dict):
        return f"its provenance is a JSON {type(row.provenance).__name__}, not an object"
    usage, success = row.usage_count, row.success_count
    if not (isinstance(usage, int) and isinstance(success, int) and 0 <= success <= usage and usage >= 1):
        return f"its counts {success!r:.20}/{usage!r:.20} are impossible"
    if not (isinstance(row.created_at, datetime) and isinstance(row.updated_at, datetime)):
        return "its timestamps are not times"
    return None


def vectors_problem(modality: str, question_bytes: int | None, caption_bytes: int | None) -> str | None:
    """Why stored embeddings cannot go into the vector index (lengths in bytes), or None."""
    if question_bytes != VECTOR_BYTES:
        return f"its question embedding has {question_bytes} bytes, not {VECTOR_BYTES}"
    if modality == "text+image" and caption_bytes not in (None, VECTOR_BYTES):
        return f"its caption embedding has {caption_bytes} bytes, not {VECTOR_BYTES}"
    return None


def memory_from_row(row: Any) -> Memory:
    """The row as a Memory; UnreadableMemoryError (naming the row) when it cannot be one."""
    problem = row_problem(row)
    if problem is not None:
        raise UnreadableMemoryError(row.id, row.namespace, problem)
    return Memory(
        id=row.id, namespace=row.namespace, question=row.question, caption=row.caption,
        summary=row.summary, plan=row.plan, correct=bool(row.correct),
        question_type=row.question_type, modality=row.modality,
        usage_count=int(row.usage_count), success_count=int(row.success_count),
        win_rate=int(row.success_count) / max(int(row.usage_count), 1), pinned=bool(row.pinned),
        provenance=dict(row.provenance),
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


def vector_to_bytes(vector: np.ndarray) -> bytes:
    return np.ascontiguousarray(vector, dtype=np.float32).tobytes()


def vectors_from_bytes(blobs: list[bytes]) -> np.ndarray:
    return np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(-1, EMBEDDING_DIM)
