"""Test-time learning's queue, kept in the memory database (memory_db's `learning_queue` table).

Two kinds of entry: a person's feedback on a run (a FeedbackItem, written in the transaction that
applies its verdict to the run's memory) and a question to learn from (a signal: a right answer
typed beside the question, or an unsupervised run). Every app process writes to it; one learner,
in this process or its own, takes the entries in order (see training.ttrl).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import asdict, dataclass, field

from backend.config import AgentConfig
from memory_db import InvalidMemoryError, LeaseFence, MemoryStore, QueueEntry
from memory_db.learning_queue import choice_field, read_item, text_field, text_list_field, time_field

FEEDBACK, SIGNAL = "feedback", "signal"
MAX_QUESTION_CHARS = AgentConfig.max_question_chars  # the agent's cap on a question
MAX_ANSWER_CHARS = 16_000
MAX_TYPED_CHARS = 4_000  # a right answer or a comment (backend.feedback caps what a person types)


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


# A FeedbackItem's fields as read back from the queue, whose rows may hold anything.
FEEDBACK_FIELDS = {
    "run_id": text_field(200), "namespace": text_field(200), "user": text_field(200),
    "question": text_field(MAX_QUESTION_CHARS), "answer": text_field(MAX_ANSWER_CHARS),
    "thumbs": choice_field(None, "up", "down"), "right_answer": text_field(MAX_TYPED_CHARS, nullable=True),
    "comment": text_field(MAX_TYPED_CHARS, nullable=True), "label_before": text_field(40),
    "label_after": text_field(40), "judge_method": text_field(1000), "memory_id": text_field(64, nullable=True),
    "memories_used": text_list_field(200, 64, required=False), "at": time_field(required=False),
    "feedback_id": text_field(64, required=False),
}


def item_from_entry(entry: QueueEntry) -> FeedbackItem:
    """The entry's FeedbackItem with every field typed; ValueError (memory_db.QueueItemError) naming
    the entry and the field when it cannot be one."""
    item = FeedbackItem(**read_item(entry, FEEDBACK_FIELDS))
    if item.run_id != entry.run_id:
        raise ValueError(f"entry {entry.seq}'s item names another run than its row")
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

    def mark_taken(self, seqs: list[int], owner: str, fence: LeaseFence | None = None) -> int:
        return self.store.mark_queue_taken(seqs, owner=owner, fence=fence)

    def quarantine(self, problems: dict[int, str], owner: str, fence: LeaseFence | None = None) -> int:
        """Set unreadable entries aside with their reasons (taken, kept for an admin to see)."""
        return self.store.quarantine_queue_entries(problems, owner=owner, fence=fence)

    def quarantined(self, limit: int | None = None) -> list[QueueEntry]:
        """The entries set aside, newest first."""
        return self.store.queue_entries(quarantined=True, limit=limit, newest_first=True)

    def quarantined_count(self) -> int:
        return self.store.queue_count(quarantined=True)
