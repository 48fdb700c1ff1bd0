"""Test-time learning's queue, kept in the memory database (memory_db's `learning_queue` table).

Two kinds of entry: a person's feedback on a run (a FeedbackItem, written in the transaction that
applies its verdict to the run's memory) and a question to learn from (a signal: a right answer
typed beside the question, or an unsupervised run). Every app process writes to it; one learner,
in this process or its own, takes the entries in order (see training.ttrl).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field, fields

from memory_db import InvalidMemoryError, MemoryStore, QueueEntry

FEEDBACK, SIGNAL = "feedback", "signal"


class QueueWriteError(OSError):
    """The feedback could not be written to the queue; the message says what to do."""


@dataclass
class FeedbackItem:
    """One queued piece of feedback, as test-time learning reads it."""

    run_id: str
    namespace: str
    user: str
    question: str
    answer: str
    thumbs: str | None
    right_answer: str | None
    comment: str | None
    label_before: str
    label_after: str
    judge_method: str
    memory_id: str | None
    memories_used: list[str] = field(default_factory=list)
    at: float = field(default_factory=time.time)
    feedback_id: str = ""  # the queue key its memory changes are recorded under (empty in old queue files)


_FIELDS = {f.name for f in fields(FeedbackItem)}


def item_from_entry(entry: QueueEntry) -> FeedbackItem:
    """The entry's FeedbackItem; ValueError naming the entry when it cannot be one."""
    if entry.item is None:
        raise ValueError(entry.problem)
    unknown = set(entry.item) - _FIELDS
    if unknown:
        raise ValueError(f"entry {entry.seq} has unknown fields {', '.join(sorted(unknown))}")
    try:
        item = FeedbackItem(**entry.item)
    except TypeError as exc:
        raise ValueError(f"entry {entry.seq} is not a feedback item ({exc})") from None
    if item.namespace != entry.namespace or item.run_id != entry.run_id:
        raise ValueError(f"entry {entry.seq}'s item names another namespace or run than its row")
    return item


class FeedbackQueue:
    """The learning queue of one memory database."""

    where = "the memory database's learning queue"

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    def submit(self, item: FeedbackItem, verdict: dict | None = None) -> int:
        """Queue `item` (and apply `verdict`, record_verdict's arguments, in the same transaction);
        returns how many feedback items of its namespace the queue holds now."""
        if not item.feedback_id:
            raise ValueError("a queued feedback item needs its feedback_id")
        try:
            self.store.enqueue(item.feedback_id, namespace=item.namespace, kind=FEEDBACK, run_id=item.run_id,
                               item=asdict(item), verdict=verdict)
        except InvalidMemoryError:
            raise
        except Exception as exc:  # the database refused or is unreachable: nothing was written
            raise QueueWriteError(
                f"The feedback could not be saved in {self.where} ({type(exc).__name__}: {exc}); nothing changed. "
                "Check that the database is reachable and has space, then send it again."
            ) from exc
        return self.count(item.namespace)

    def append(self, item: FeedbackItem) -> int:
        """Queue `item` without memory changes (a comment, or a test's feedback); returns the namespace's count."""
        if not item.feedback_id:
            item.feedback_id = uuid.uuid4().hex
        return self.submit(item)

    def add_signal(self, key: str, *, namespace: str, run_id: str, signal: dict) -> None:
        """Queue a question to learn from (a Signal's fields), at most once per key."""
        self.store.enqueue(key, namespace=namespace, kind=SIGNAL, run_id=run_id, item=signal)

    def items(self, namespace: str | None = None, *, run_id: str | None = None,
              skip_damaged: bool = False) -> list[FeedbackItem]:
        """The feedback items in order (of one namespace or run). A damaged entry raises ValueError
        unless `skip_damaged`."""
        found = []
        for entry in self.store.queue_entries(namespace=namespace, kind=FEEDBACK, run_id=run_id):
            try:
                found.append(item_from_entry(entry))
            except ValueError:
                if not skip_damaged:
                    raise
        return found

    def damage(self) -> list[str]:
        """Sentences on the entries readers skip."""
        problems = []
        for entry in self.store.queue_entries(kind=FEEDBACK):
            try:
                item_from_entry(entry)
            except ValueError as problem:
                problems.append(f"{problem}; it is skipped")
        return problems

    def count(self, namespace: str | None = None) -> int:
        return self.store.queue_count(namespace=namespace, kind=FEEDBACK)

    def __len__(self) -> int:
        return self.count()

    def untaken(self, limit: int | None = None) -> list[QueueEntry]:
        """Entries of both kinds that no learner has taken yet, oldest first."""
        return self.store.queue_entries(untaken=True, limit=limit)

    def untaken_count(self, namespace: str | None = None) -> int:
        return self.store.queue_count(namespace=namespace, untaken=True)

    def mark_taken(self, seqs: list[int], owner: str) -> int:
        return self.store.mark_queue_taken(seqs, owner=owner)
