"""What test-time learning learns from, and how a rollout's answer is graded against it.

Kinds of signal:
- ``ground_truth``: an answer known to be right (typed by a user, a thumbs-up on an answer, or an
  evaluation stream's gold answer). Rollouts are graded by the Judge against it.
- ``rejected``: a thumbs-down without a correction. A rollout repeating the rejected answer is
  wrong; any other answer is graded by the Judge's evaluators and arbiter (no ground truth).
- ``unsupervised`` (opt-in): a question without feedback; the evaluators and arbiter grade.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from backend.feedback_queue import MAX_ANSWER_CHARS, MAX_QUESTION_CHARS, SIGNAL, item_from_entry
from backend.judge import Judge, answer_contains, normalize_answer
from memory_db import QueueEntry
from memory_db.learning_queue import choice_field, read_item, text_field, time_field

KINDS = ("ground_truth", "rejected", "unsupervised")
# A Signal's fields as read back from the learning queue, whose rows may hold anything.
SIGNAL_FIELDS = {
    "question": text_field(MAX_QUESTION_CHARS), "kind": choice_field(*KINDS),
    "namespace": text_field(200, required=False), "answer": text_field(MAX_ANSWER_CHARS, required=False),
    "source": text_field(200, required=False), "at": time_field(required=False),
    "memory_id": text_field(200, required=False),
}


class SignalError(ValueError):
    """The feedback cannot become a learning signal; the message says why."""


@dataclass
class Signal:
    question: str
    kind: str
    namespace: str = "default"
    answer: str = ""  # ground_truth: the right answer; rejected: the answer marked wrong
    source: str = ""  # "feedback:<run id>", "stream:<id>", "unsupervised:<run id>"
    at: float = field(default_factory=time.time)
    memory_id: str = ""  # the memory the run stored, when the signal is about a run that stored one

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise SignalError(f"signal kind must be one of {', '.join(KINDS)}, got {self.kind!r}.")
        if not all(isinstance(text, str) for text in (self.question, self.namespace, self.answer, self.source, self.memory_id)):
            raise SignalError("a signal's question, namespace, answer, source and memory id are text.")
        if not self.question.strip():
            raise SignalError("a signal needs the question.")
        if self.kind != "unsupervised" and not self.answer.strip():
            raise SignalError(f"a {self.kind} signal needs the answer it is about.")

    def to_dict(self) -> dict:
        return asdict(self)


def signal_from_feedback(item) -> Signal | None:
    """A feedback-queue item as a signal: a typed right answer wins, then thumbs; comments alone teach nothing."""
    about = dict(namespace=item.namespace, source=f"feedback:{item.run_id}", at=item.at, memory_id=item.memory_id or "")
    if item.right_answer:
        return Signal(item.question, "ground_truth", answer=item.right_answer, **about)
    if item.thumbs == "up" and item.answer.strip():
        return Signal(item.question, "ground_truth", answer=item.answer, **about)
    if item.thumbs == "down" and item.answer.strip():
        return Signal(item.question, "rejected", answer=item.answer, **about)
    return None


def signal_of_entry(entry: QueueEntry) -> Signal | None:
    """A learning-queue entry as the signal it teaches, or None (a comment alone teaches nothing).
    Every field is typed first: an entry that cannot be read raises ValueError naming the entry and
    the field ("entry 17, 'question' is not text"), for the learner to quarantine it."""
    try:
        if entry.kind == SIGNAL:
            return Signal(**read_item(entry, SIGNAL_FIELDS))
        return signal_from_feedback(item_from_entry(entry))
    except SignalError as exc:
        raise SignalError(f"entry {entry.seq}: {exc}") from None


def queued_signals(queue, namespace: str | None = None) -> int:
    """How many entries of the learning queue no learner has taken yet would become signals (of one
    namespace); an entry that cannot be read counts for nothing (the learner quarantines it)."""
    count = 0
    for entry in queue.untaken():
        if namespace not in (None, entry.namespace):
            continue
        try:
            count += signal_of_entry(entry) is not None
        except ValueError:
            pass
    return count


class SignalGrader:
    """Grades rollout answers against one signal; has the `correct(question, answer, _)` shape of
    `training.episode.Grader`, so the same episode code serves offline training and TTRL."""

    def __init__(self, signal: Signal, judge: Judge | None) -> None:
        if signal.kind != "ground_truth" and judge is None:
            raise SignalError(f"a {signal.kind} signal needs the Judge's model to grade answers.")
        self.signal, self.judge = signal, judge
        self._graded: dict[tuple[str, str], bool] = {}  # rollouts often give the same answer: graded once

    def correct(self, question: str, answer: str, _ground_truth: str = "") -> bool:
        if (question, answer) not in self._graded:
            self._graded[(question, answer)] = self._grade(question, answer)
        return self._graded[(question, answer)]

    def _grade(self, question: str, answer: str) -> bool:
        if not answer.strip():
            return False
        kind, reference = self.signal.kind, self.signal.answer
        if kind == "ground_truth":
            if self.judge is None:
                return answer_contains(answer, reference)
            return self.judge.grade(question, answer, reference).correct
        if kind == "rejected" and normalize_answer(answer) == normalize_answer(reference):
            return False
        return self.judge.evaluate_without_ground_truth(question, answer, []).leans_correct
