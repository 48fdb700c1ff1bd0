"""The change history: reading entries back, and undoing one (what it leads to, and the write)."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, select

from .errors import HistoryNotFoundError, InvalidMemoryError, UndoConflictError
from .memory_writes import MemoryWrites
from .records import HistoryEntry, Memory
from .rows import CONTENT_FIELDS, from_db_time, memory_from_row, utc_now
from .schema import memory_history
from .snapshots import memory_from_record
from .struck import STRIKE_ACTIONS
from .validation import check_namespace
from .vector_backend import VectorTransaction


def history_entry(row: Any) -> HistoryEntry:
    return HistoryEntry(id=int(row.id), memory_id=row.memory_id, namespace=row.namespace, action=row.action,
                        before=row.before, after=row.after, actor=row.actor,
                        created_at=from_db_time(row.created_at))


def reverted_state(entry: HistoryEntry, before: Memory | None, after: Memory | None,
              current: Memory | None) -> Memory | None:
    """The state that undoing `entry` leads to, given the memory's `current` state."""
    if after is None:  # the change removed the memory
        if current is not None:
            raise UndoConflictError(
                f"Memory {entry.memory_id} exists again; delete it before undoing entry {entry.id}.")
        return before
    if current is None:
        raise UndoConflictError(f"Memory {entry.memory_id} no longer exists; undo its deletion first.")
    if before is None:  # the change added the memory
        return None
    changed = [f for f in CONTENT_FIELDS if getattr(before, f) != getattr(after, f)]
    stale = [f for f in changed if getattr(current, f) != getattr(after, f)]
    if stale:
        raise UndoConflictError(
            f"Memory {entry.memory_id} changed again after history entry {entry.id} ({', '.join(stale)}); "
            "undo the later changes first."
        )
    usage = max(1, current.usage_count + before.usage_count - after.usage_count)
    success = min(usage, max(0, current.success_count + before.success_count - after.success_count))
    reverted = {f: getattr(before, f) for f in changed}
    if "caption" in changed:
        reverted["modality"] = before.modality
    return replace(current, **reverted, usage_count=usage, success_count=success,
                   win_rate=success / usage, updated_at=utc_now())


class HistoryAndUndo(MemoryWrites):
    def history(self, memory_id: str | None = None, *, namespace: str, limit: int = 100) -> list[HistoryEntry]:
        """Recorded changes, newest first: of one memory, or of the whole namespace."""
        check_namespace(namespace)
        query = select(memory_history).where(memory_history.c.namespace == namespace)
        if memory_id is not None:
            query = query.where(memory_history.c.memory_id == memory_id)
        with self._engine.connect() as conn:
            rows = conn.execute(query.order_by(memory_history.c.id.desc()).limit(limit)).all()
        return [history_entry(row) for row in rows]

    def undo(self, history_id: int, *, namespace: str, actor: str = "user") -> Memory | None:
        """Revert the change recorded as `history_id`. Fields the change did not touch keep
        their current values; usage counters are reverted by difference. Returns the memory as
        restored (None when undoing an add). The undo itself is recorded too. Undoing a "strike"
        retrieves the struck source again and undoing an "unstrike" strikes it again (memory_db.struck)."""
        check_namespace(namespace)
        with self._engine.connect() as conn:
            row = conn.execute(select(memory_history).where(
                memory_history.c.id == history_id, memory_history.c.namespace == namespace)).one_or_none()
        if row is None:
            raise HistoryNotFoundError(history_id, namespace)
        entry = history_entry(row)
        if entry.action in STRIKE_ACTIONS:  # a source struck as wrong (memory_db.struck): strike or undo it again
            self.undo_strike_entry(entry, actor=actor)
            with self._engine.connect() as conn:
                current = self._row(conn, namespace, entry.memory_id)
            return memory_from_row(current) if current is not None else None
        before, after = (self._snapshot(entry, side, namespace) for side in ("before", "after"))

        def work(conn: Connection, stored_vectors: VectorTransaction) -> Memory | None:
            current_row = self._row(conn, namespace, entry.memory_id)
            current = memory_from_row(current_row) if current_row is not None else None
            target = reverted_state(entry, before, after, current)
            text_changed = current is None or (
                target is not None and (target.question, target.caption) != (current.question, current.caption))
            vectors = self._encode(target.question, target.caption) if target is not None and text_changed else None
            row_id = self._write_state(conn, stored_vectors, namespace, current_row, target, vectors)
            self._record_history(conn, entry.memory_id, namespace, "undo", current, target, actor)
            if current is None:
                self._evict_over_capacity(conn, stored_vectors, namespace, row_id, actor)
            return target

        return self._vectors.write(namespace, work)

    @staticmethod
    def _snapshot(entry: HistoryEntry, side: str, namespace: str) -> Memory | None:
        """A history entry's before/after state as a memory of `namespace` and of the entry's memory,
        validated as a new memory is: an entry imported before imports were validated may name
        another namespace or hold values no memory may have."""
        data = getattr(entry, side)
        if data is None:
            return None
        try:
            return memory_from_record(data, namespace=namespace, now=utc_now(), memory_id=entry.memory_id,
                                      complete=True)
        except (InvalidMemoryError, KeyError, TypeError, ValueError) as exc:
            raise InvalidMemoryError(
                f"History entry {entry.id} cannot be undone: its {side!r} state is not a valid memory "
                f"({str(exc).rstrip('.')}).") from None
