"""Lifecycle policy: which duplicate wins, which memory is evicted first."""
from __future__ import annotations

from dataclasses import replace

from sqlalchemy import Float, and_, cast, select

from .provenance import read_provenance
from .records import Memory, NewMemory
from .schema import memories

EXACT_DUPLICATE_SIMILARITY = 0.9999


# Where a person's word comes from: thumbs or a right answer (feedback), the Memory view (person).
PERSON_SOURCES = ("feedback", "person")


def held_by_person(memory: Memory) -> bool:
    """A memory a person labelled, edited or pinned: no later run replaces or relabels it."""
    provenance = read_provenance(memory.provenance)
    return memory.pinned or provenance.verdict_source in PERSON_SOURCES or bool(provenance.edited_by)


NEW_MEMORY_COUNTS = (1, 1)  # (usage, success) a memory is created with: a prior that ranks it as proven


def uses_since_stored(memory: Memory) -> tuple[int, int]:
    """(successes, uses) of the runs that used the memory after it was stored, without the prior it
    starts with (NEW_MEMORY_COUNTS): a new memory, success or failure lesson, has been used 0 times."""
    usage, success = NEW_MEMORY_COUNTS
    return max(0, memory.success_count - success), max(0, memory.usage_count - usage)


def is_verified(memory: Memory | NewMemory) -> bool:
    """Its verdict comes from ground truth or a person, not from the Judge's own opinion."""
    return read_provenance(memory.provenance).verified


def judged_only(memory: Memory | NewMemory) -> bool:
    """Labelled by the Judge alone, without ground truth or a person."""
    provenance = read_provenance(memory.provenance)
    return provenance.verdict_source == "judge" and not provenance.verified


def with_outcome(base: Memory, existing: Memory, correct: bool, now) -> Memory:
    """`base` carrying `existing`'s counts plus one more outcome (a repeat or a near-duplicate run)."""
    usage, success = existing.usage_count + 1, existing.success_count + int(correct)
    return replace(base, usage_count=usage, success_count=success, win_rate=success / usage, updated_at=now)


def may_overwrite(existing: Memory, new: NewMemory) -> bool:
    """Whether a run's new memory may take the place of `existing` at all: never one a person
    holds, never a verified one by an unverified run."""
    return not held_by_person(existing) and (is_verified(new) or not is_verified(existing))


def replaces_exact_duplicate(existing: Memory, new: NewMemory) -> bool:
    """Same question asked again: a person's memory and a verified one (by an unverified run) stay;
    a verified run replaces the Judge's opinion, and so does the Judge's opinion of a newer run;
    otherwise an incorrect memory is replaced, a correct one only by a correct memory with a shorter
    summary."""
    if not may_overwrite(existing, new):
        return False
    if is_verified(new) and not is_verified(existing):
        return True
    if judged_only(existing) and judged_only(new):
        return True  # two opinions of the Judge: the newer run's workflow is kept
    if not existing.correct:
        return True
    return new.correct and len(new.summary) < len(existing.summary)


def new_is_better(existing: Memory, new: NewMemory) -> bool:
    """For near-duplicates (when may_overwrite): verified beats unverified, correct beats incorrect,
    then the higher win rate (a new memory counts as 1 of 1), then the shorter summary; ties keep
    the existing memory."""
    if not may_overwrite(existing, new):
        return False
    if is_verified(new) != is_verified(existing):
        return is_verified(new)
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
