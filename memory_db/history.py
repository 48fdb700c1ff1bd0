"""The change history: reading entries back, and computing what undoing one leads to."""
from __future__ import annotations

from dataclasses import replace
from typing import Any

from .errors import UndoConflictError
from .records import HistoryEntry, Memory
from .rows import CONTENT_FIELDS, from_db_time, utc_now


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
