"""Lifecycle policy: which duplicate wins, which memory is evicted first."""
from __future__ import annotations

from sqlalchemy import Float, and_, cast, select

from .records import Memory, NewMemory
from .schema import memories

EXACT_DUPLICATE_SIMILARITY = 0.9999


def replaces_exact_duplicate(existing: Memory, new: NewMemory) -> bool:
    """Same question asked again: an incorrect memory is replaced; a correct one only by a
    correct memory with a shorter summary."""
    if not existing.correct:
        return True
    return new.correct and len(new.summary) < len(existing.summary)


def new_is_better(existing: Memory, new: NewMemory) -> bool:
    """For near-duplicates: correct beats incorrect, then the higher win rate (a new memory
    counts as 1 of 1), then the shorter summary; ties keep the existing memory."""
    existing_key = (existing.correct, existing.win_rate, -len(existing.summary))
    new_key = (new.correct, 1.0, -len(new.summary))
    return new_key > existing_key


def eviction_order(namespace: str, exclude_row_id: int | None):
    """Unpinned memories of `namespace`, lowest value first: win rate, then usage, then age."""
    win_rate = cast(memories.c.success_count, Float) / memories.c.usage_count
    condition = and_(memories.c.namespace == namespace, memories.c.pinned.is_(False))
    if exclude_row_id is not None:
        condition = and_(condition, memories.c.row_id != exclude_row_id)
    return (
        select(memories.c.row_id)
        .where(condition)
        .order_by(win_rate.asc(), memories.c.usage_count.asc(), memories.c.created_at.asc(),
                  memories.c.row_id.asc())
    )
