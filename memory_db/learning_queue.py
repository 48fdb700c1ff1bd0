"""Test-time learning's queue in the database: rows in order, each taken once by the learner.

The app writes a row per piece of feedback (in the transaction that applies its verdict, see
MemoryStore.enqueue) or per question to learn from; the learner reads the rows nobody has taken,
keeps them in its own state, then marks them taken. A learner that dies between the two reads the
same rows again, and dedupes them by key, so nothing is lost and nothing is learned twice.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, func, insert, select, update

from .errors import InvalidMemoryError
from .rows import from_db_time, to_db_time, utc_now
from .schema import learning_queue

KINDS = ("feedback", "signal")
MAX_ITEM_BYTES = 64_000


@dataclass(frozen=True)
class QueueEntry:
    seq: int
    key: str
    namespace: str
    kind: str
    run_id: str
    item: dict | None  # None when the stored JSON is unreadable (then `problem` says why)
    created_at: datetime
    taken_at: datetime | None
    taken_by: str | None
    problem: str | None = None


def check_entry(key: str, kind: str, run_id: str, item: dict) -> str:
    """The item as stored JSON, or InvalidMemoryError naming what is wrong."""
    if not isinstance(key, str) or not 0 < len(key) <= 64:
        raise InvalidMemoryError(f"A queue key is 1-64 characters, got {key!r}.")
    if kind not in KINDS:
        raise InvalidMemoryError(f"A queue entry's kind is one of {', '.join(KINDS)}, got {kind!r}.")
    if not isinstance(run_id, str) or len(run_id) > 200:
        raise InvalidMemoryError("A queue entry's run id is text of at most 200 characters.")
    if not isinstance(item, dict):
        raise InvalidMemoryError(f"A queue entry's item is a JSON object, got {type(item).__name__}.")
    text = json.dumps(item, ensure_ascii=False)
    if len(text.encode("utf-8")) > MAX_ITEM_BYTES:
        raise InvalidMemoryError(f"A queue entry's item is at most {MAX_ITEM_BYTES:,} bytes of JSON.")
    return text


def insert_entry(conn: Connection, *, key: str, namespace: str, kind: str, run_id: str, item_json: str,
                 taken_by: str | None = None) -> bool:
    """Insert one entry unless its key is queued already; returns whether it was inserted."""
    if conn.execute(select(learning_queue.c.seq).where(learning_queue.c.key == key)).first() is not None:
        return False
    now = to_db_time(utc_now())
    conn.execute(insert(learning_queue), {
        "key": key, "namespace": namespace, "kind": kind, "run_id": run_id, "item": item_json, "created_at": now,
        "taken_at": now if taken_by else None, "taken_by": taken_by,
    })
    return True


def _entry(row) -> QueueEntry:
    problem = None
    try:
        item = json.loads(row.item)
        if not isinstance(item, dict):
            item, problem = None, f"entry {row.seq} holds {type(item).__name__}, not a JSON object"
    except ValueError as exc:
        item, problem = None, f"entry {row.seq} is not valid JSON ({exc})"
    return QueueEntry(row.seq, row.key, row.namespace, row.kind, row.run_id, item, from_db_time(row.created_at),
                      from_db_time(row.taken_at) if row.taken_at is not None else None, row.taken_by, problem)


def _filtered(query, *, namespace: str | None, kind: str | None, run_id: str | None, untaken: bool):
    if namespace is not None:
        query = query.where(learning_queue.c.namespace == namespace)
    if kind is not None:
        query = query.where(learning_queue.c.kind == kind)
    if run_id is not None:
        query = query.where(learning_queue.c.run_id == run_id)
    if untaken:
        query = query.where(learning_queue.c.taken_at.is_(None))
    return query


def read_entries(conn: Connection, *, namespace: str | None = None, kind: str | None = None,
                 run_id: str | None = None, untaken: bool = False, limit: int | None = None) -> list[QueueEntry]:
    query = _filtered(select(learning_queue), namespace=namespace, kind=kind, run_id=run_id, untaken=untaken)
    query = query.order_by(learning_queue.c.seq)
    if limit is not None:
        query = query.limit(limit)
    return [_entry(row) for row in conn.execute(query)]


def count_entries(conn: Connection, *, namespace: str | None = None, kind: str | None = None,
                  untaken: bool = False) -> int:
    query = _filtered(select(func.count()).select_from(learning_queue), namespace=namespace, kind=kind,
                      run_id=None, untaken=untaken)
    return int(conn.execute(query).scalar_one())


def mark_taken(conn: Connection, seqs: Sequence[int], owner: str) -> int:
    """Mark entries taken by `owner` (those not taken already); returns how many changed."""
    changed = 0
    now = to_db_time(utc_now())
    for start in range(0, len(seqs), 500):
        changed += conn.execute(
            update(learning_queue)
            .where(learning_queue.c.seq.in_(list(seqs[start:start + 500])), learning_queue.c.taken_at.is_(None))
            .values(taken_at=now, taken_by=owner[:200])
        ).rowcount
    return changed
