"""Sources a person struck as wrong: a retrieved passage (by its stable key) or a memory. A struck
source is not retrieved again in its namespace (the search tool bound to the namespace asks
`struck_keys`; `search_contrastive` leaves struck memories out); other namespaces are unaffected.

A strike is recorded in the history of the memory it concerns (the struck memory, or the memory of
the run whose citation was struck) as a "strike" entry; undoing that entry, or `unstrike`, records an
"unstrike" entry, and undoing that strikes the source again.
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import Connection, select, update

from .errors import InvalidMemoryError, MemoryStoreError
from .records import HistoryEntry
from .rows import from_db_time, to_db_time, utc_now
from .schema import memories, struck_sources
from .store_base import StoreBase
from .validation import check_memory_id, check_namespace, check_text

PASSAGE, MEMORY = "passage", "memory"
MAX_KEY_CHARS = 1000
MEMORY_KEY_PREFIX = "memory:"
STRIKE_ACTIONS = ("strike", "unstrike")


def memory_key(memory_id: str) -> str:
    return f"{MEMORY_KEY_PREFIX}{memory_id}"


class StrikeNotFoundError(MemoryStoreError, KeyError):
    """No struck source with this key in the namespace."""

    def __init__(self, key: str, namespace: str):
        super().__init__(f"Nothing struck under {key[:120]!r} in namespace {namespace!r}; "
                         "the Memory view's struck sources list what can be undone.")

    def __str__(self) -> str:
        return self.args[0]


@dataclass(frozen=True)
class StruckSource:
    """A source struck in `namespace`. `active`: it is not retrieved; False once the strike was undone."""

    key: str
    namespace: str
    kind: str
    title: str
    source: str
    url: str | None
    sentence: str | None
    memory_id: str | None
    run_id: str | None
    actor: str
    active: bool
    strike_history_id: int | None
    unstrike_history_id: int | None
    created_at: datetime
    updated_at: datetime


def _struck(row) -> StruckSource:
    return StruckSource(key=row.key, namespace=row.namespace, kind=row.kind, title=row.title, source=row.source,
                        url=row.url, sentence=row.sentence, memory_id=row.memory_id, run_id=row.run_id,
                        actor=row.actor, active=bool(row.active), strike_history_id=row.strike_history_id,
                        unstrike_history_id=row.unstrike_history_id, created_at=from_db_time(row.created_at),
                        updated_at=from_db_time(row.updated_at))


class StruckSources(StoreBase):
    # _record_history comes from MemoryWrites, beside which MemoryStore composes this part
    def strike(self, key: str, *, namespace: str, kind: str = PASSAGE, title: str, source: str = "",
               url: str | None = None, sentence: str | None = None, memory_id: str | None = None,
               run_id: str | None = None, actor: str = "user") -> StruckSource:
        """Strike the source `key` in `namespace`: it is not retrieved there again until undone. A
        memory strike's key is memory_key(id) and its `memory_id` that memory. With `memory_id` of a
        memory the namespace holds, the strike is a "strike" entry in its history. Striking what is
        struck already changes nothing."""
        check_namespace(namespace)
        key = self._checked_key(key)
        if kind not in (PASSAGE, MEMORY):
            raise InvalidMemoryError(f"A struck source is a {PASSAGE!r} or a {MEMORY!r}, got {kind!r:.40}.")
        if kind == MEMORY and (memory_id is None or key != memory_key(memory_id)):
            raise InvalidMemoryError(f"A struck memory's key is {MEMORY_KEY_PREFIX}<its id>; give memory_id too.")
        if memory_id is not None:
            check_memory_id(memory_id)
        check_text("title", title)
        fields = {"kind": kind, "title": title[:2000], "source": (source or "")[:200], "url": url,
                  "sentence": (sentence or None) and sentence[:2000], "memory_id": memory_id,
                  "run_id": (run_id or None) and run_id[:200], "actor": actor[:200]}
        with self._lock, self._writer() as conn:
            if kind == MEMORY and not self._holds(conn, namespace, memory_id):
                raise InvalidMemoryError(f"No memory {memory_id!r} in namespace {namespace!r} to strike; open it "
                                         "from the Memory view's table.")
            row = self._struck_row(conn, namespace, key)
            if row is not None and row.active:
                return _struck(row)
            now = to_db_time(utc_now())
            history_id = self._strike_entry(conn, namespace, memory_id, "strike", actor)
            values = {**fields, "active": True, "strike_history_id": history_id, "unstrike_history_id": None,
                      "updated_at": now}
            if row is None:
                conn.execute(struck_sources.insert(), {"namespace": namespace, "key": key, "created_at": now, **values})
            else:
                conn.execute(update(struck_sources).where(struck_sources.c.id == row.id).values(**values))
            return _struck(self._struck_row(conn, namespace, key))

    def unstrike(self, key: str, *, namespace: str, actor: str = "user") -> StruckSource:
        """Undo the strike of `key` in `namespace`: it is retrieved again. Recorded as an "unstrike"
        entry in the history of the strike's memory (when it has one)."""
        check_namespace(namespace)
        with self._lock, self._writer() as conn:
            row = self._struck_row(conn, namespace, self._checked_key(key))
            if row is None:
                raise StrikeNotFoundError(key, namespace)
            if not row.active:
                return _struck(row)
            history_id = self._strike_entry(conn, namespace, row.memory_id, "unstrike", actor)
            conn.execute(update(struck_sources).where(struck_sources.c.id == row.id).values(
                active=False, unstrike_history_id=history_id, updated_at=to_db_time(utc_now())))
            return _struck(self._struck_row(conn, namespace, row.key))

    def struck(self, namespace: str, *, include_undone: bool = False, limit: int = 500) -> list[StruckSource]:
        """The sources struck in `namespace`, newest first (with `include_undone`, strikes undone too)."""
        check_namespace(namespace)
        query = select(struck_sources).where(struck_sources.c.namespace == namespace)
        if not include_undone:
            query = query.where(struck_sources.c.active.is_(True))
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(struck_sources.c.updated_at.desc(), struck_sources.c.id.desc())
                                .limit(limit)).all()
        return [_struck(row) for row in rows]

    def struck_keys(self, namespace: str) -> frozenset[str]:
        """The keys of the passages struck in `namespace`: what its search leaves out."""
        check_namespace(namespace)
        with self._engine.connect() as conn:
            keys = conn.execute(select(struck_sources.c.key).where(
                struck_sources.c.namespace == namespace, struck_sources.c.kind == PASSAGE,
                struck_sources.c.active.is_(True))).scalars().all()
        return frozenset(keys)

    def undo_strike_entry(self, entry: HistoryEntry, *, actor: str) -> StruckSource:
        """Undo a "strike" history entry (the source is retrieved again) or an "unstrike" one (it is
        struck again). An entry imported from elsewhere names no strike of this namespace: refused."""
        column = struck_sources.c.strike_history_id if entry.action == "strike" else struck_sources.c.unstrike_history_id
        with self._engine.connect() as conn:
            row = conn.execute(select(struck_sources).where(
                struck_sources.c.namespace == entry.namespace, column == entry.id)).one_or_none()
        if row is None:
            raise InvalidMemoryError(f"History entry {entry.id} records a {entry.action} of no source this namespace "
                                     "holds (it was imported); strike the source again from a citation or the "
                                     "Memory view.")
        if entry.action == "strike":
            return self.unstrike(row.key, namespace=entry.namespace, actor=actor)
        return self.strike(row.key, namespace=entry.namespace, kind=row.kind, title=row.title, source=row.source,
                           url=row.url, sentence=row.sentence, memory_id=row.memory_id, run_id=row.run_id,
                           actor=actor)

    # -- parts --------------------------------------------------------------------------------------
    @staticmethod
    def _checked_key(key: str) -> str:
        if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_CHARS:
            raise InvalidMemoryError(f"A struck source's key must be a non-empty string of at most {MAX_KEY_CHARS} "
                                     f"characters, got {key!r:.60}.")
        return key


    @staticmethod
    def _struck_row(conn: Connection, namespace: str, key: str):
        return conn.execute(select(struck_sources).where(
            struck_sources.c.namespace == namespace, struck_sources.c.key == key)).one_or_none()

    @staticmethod
    def _holds(conn: Connection, namespace: str, memory_id: str | None) -> bool:
        return memory_id is not None and conn.execute(select(memories.c.row_id).where(
            memories.c.namespace == namespace, memories.c.id == memory_id)).first() is not None

    def _strike_entry(self, conn: Connection, namespace: str, memory_id: str | None, action: str,
                      actor: str) -> int | None:
        """The history entry of a strike or its undo, on the memory it concerns; None without one."""
        if not self._holds(conn, namespace, memory_id):
            return None
        return self._record_history(conn, memory_id, namespace, action, None, None, actor)
