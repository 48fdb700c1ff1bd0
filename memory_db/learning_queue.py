"""Test-time learning's queue in the database: rows in order, each taken once by the learner.

The app writes a row per piece of feedback (in the transaction that applies its verdict, see
MemoryStore.enqueue) or per question to learn from; the learner reads the rows nobody has taken,
keeps them in its own state, then marks them taken. A learner that dies between the two reads the
same rows again, and dedupes them by key, so nothing is lost and nothing is learned twice.

Rows may hold anything (an older version, a hand edit, a bug), so a reader types an item's fields with
`read_item` before using them; a row that cannot be read is quarantined: taken with the reason kept,
so it never blocks the rows after it and stays for an admin to see.
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from .errors import InvalidMemoryError
from .rows import from_db_time, to_db_time, utc_now
from .schema import learning_queue

KINDS = ("feedback", "signal")
MAX_ITEM_BYTES = 64_000
MAX_QUARANTINE_CHARS = 1_000
# What a queued time may be: 1970 up to the year 3000, which datetime.fromtimestamp can show.
LATEST_TIME_S = 32_503_680_000.0
NOT_A_TIME = "is not a time (seconds since 1970, or an ISO 8601 date)"


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
    quarantine: str | None = None  # why the learner set the row aside (it is taken and never read again)


class QueueItemError(ValueError):
    """A queued item cannot be read as the record its kind names; the message names the entry and
    the field ("entry 17, 'question' is not text")."""


@dataclass(frozen=True)
class ItemField:
    """How one field of a queued item is read: `read` returns the typed value or raises ValueError
    saying what the value is not ("is not text"); a field that is not `required` may be missing."""

    read: Callable[[Any], Any]
    required: bool = True


def text_field(max_chars: int, *, nullable: bool = False, required: bool = True) -> ItemField:
    def read(value):
        if value is None and nullable:
            return None
        if not isinstance(value, str):
            raise ValueError("is not text")
        if len(value) > max_chars:
            raise ValueError(f"is {len(value):,} characters, over the {max_chars:,} allowed")
        return value

    return ItemField(read, required)


def choice_field(*choices: str | None, required: bool = True) -> ItemField:
    def read(value):
        if not any(value is choice or (isinstance(value, str) and value == choice) for choice in choices):
            raise ValueError(f"is not one of {', '.join(repr(c) for c in choices)}")
        return value

    return ItemField(read, required)


def text_list_field(max_items: int, max_chars: int, *, required: bool = True) -> ItemField:
    def read(value):
        if not isinstance(value, list) or len(value) > max_items:
            raise ValueError(f"is not a list of at most {max_items} texts")
        if not all(isinstance(text, str) and len(text) <= max_chars for text in value):
            raise ValueError(f"holds something that is not text of at most {max_chars} characters")
        return value

    return ItemField(read, required)


def time_field(*, required: bool = True) -> ItemField:
    """Seconds since 1970, from a number or an ISO 8601 date (without a zone: UTC)."""

    def read(value):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            seconds = float(value)
        elif isinstance(value, str):
            try:
                moment = datetime.fromisoformat(value)
            except ValueError:
                raise ValueError(NOT_A_TIME)
            seconds = (moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)).timestamp()
        else:
            raise ValueError(NOT_A_TIME)
        if not (math.isfinite(seconds) and 0.0 <= seconds < LATEST_TIME_S):
            raise ValueError(NOT_A_TIME)
        return seconds

    return ItemField(read, required)


def read_item(entry: QueueEntry, fields: Mapping[str, ItemField]) -> dict:
    """The entry's item with every field typed, or QueueItemError naming the entry and the first
    field that is wrong. An item's `namespace` is its row's (checked when it was queued): an item
    naming another is refused, and one without it gets the row's."""
    if entry.item is None:
        raise QueueItemError(entry.problem)
    unknown = set(entry.item) - set(fields)
    if unknown:
        raise QueueItemError(f"entry {entry.seq} has unknown fields {', '.join(sorted(unknown))}")
    typed = {}
    for name, field in fields.items():
        if name not in entry.item:
            if field.required:
                raise QueueItemError(f"entry {entry.seq} lacks {name!r}")
            continue
        try:
            typed[name] = field.read(entry.item[name])
        except ValueError as exc:
            raise QueueItemError(f"entry {entry.seq}, {name!r} {exc}") from None
    if "namespace" in fields:
        if typed.get("namespace", entry.namespace) != entry.namespace:
            raise QueueItemError(f"entry {entry.seq}, 'namespace' is not its row's namespace")
        typed["namespace"] = entry.namespace
    return typed


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
                      from_db_time(row.taken_at) if row.taken_at is not None else None, row.taken_by, problem,
                      row.quarantine)


def _filtered(query, *, namespace: str | None, kind: str | None, run_id: str | None, untaken: bool,
              quarantined: bool = False):
    if namespace is not None:
        query = query.where(learning_queue.c.namespace == namespace)
    if kind is not None:
        query = query.where(learning_queue.c.kind == kind)
    if run_id is not None:
        query = query.where(learning_queue.c.run_id == run_id)
    if untaken:
        query = query.where(learning_queue.c.taken_at.is_(None))
    if quarantined:
        query = query.where(learning_queue.c.quarantine.is_not(None))
    return query


def read_entries(conn: Connection, *, namespace: str | None = None, kind: str | None = None,
                 run_id: str | None = None, untaken: bool = False, quarantined: bool = False,
                 limit: int | None = None, newest_first: bool = False) -> list[QueueEntry]:
    query = _filtered(select(learning_queue), namespace=namespace, kind=kind, run_id=run_id, untaken=untaken,
                      quarantined=quarantined)
    query = query.order_by(learning_queue.c.seq.desc() if newest_first else learning_queue.c.seq)
    if limit is not None:
        query = query.limit(limit)
    return [_entry(row) for row in conn.execute(query)]


def count_entries(conn: Connection, *, namespace: str | None = None, kind: str | None = None,
                  untaken: bool = False, quarantined: bool = False) -> int:
    query = _filtered(select(func.count()).select_from(learning_queue), namespace=namespace, kind=kind,
                      run_id=None, untaken=untaken, quarantined=quarantined)
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


def quarantine_entries(conn: Connection, problems: Mapping[int, str], owner: str) -> int:
    """Set entries aside (those not taken already): taken by `owner`, with the sentence saying why;
    returns how many changed."""
    changed = 0
    now = to_db_time(utc_now())
    for seq, problem in problems.items():
        changed += conn.execute(
            update(learning_queue)
            .where(learning_queue.c.seq == seq, learning_queue.c.taken_at.is_(None))
            .values(taken_at=now, taken_by=owner[:200], quarantine=problem[:MAX_QUARANTINE_CHARS])
        ).rowcount
    return changed
