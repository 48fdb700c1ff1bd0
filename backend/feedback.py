"""A person's feedback on an answer: relabel the run's memory through the Judge, update the win
rates of the memories the run used, and queue the feedback for test-time learning.

Plain functions over the store, the run log and the Judge; the web UI only calls `submit_feedback`.
The queue is a durable JSON-lines file under the data directory (test-time learning reads it;
that learner is not built yet).
"""

from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from backend.events import AnswerReady, MemoriesRetrieved, MemoryStored, RunStarted, VerdictReady
from backend.judge import CORRECT, INCORRECT, Judge
from backend.runlog import RunLog
from memory_db import MemoryNotFoundError, MemoryStore

THUMBS = ("up", "down")
MAX_FEEDBACK_CHARS = 4000


class FeedbackError(ValueError):
    """The feedback cannot be applied; the message says what to do."""


@dataclass
class FeedbackItem:
    """One queued piece of feedback, as test-time learning will read it."""

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


@dataclass
class FeedbackOutcome:
    """What the feedback changed, in sentences for the page."""

    label_before: str
    label_after: str
    changes: list[str]
    queued: int  # the queue's length after this item


class FeedbackQueue:
    """Append-only JSON lines, flushed and fsynced per item so nothing is lost on a crash."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def append(self, item: FeedbackItem) -> int:
        line = json.dumps(asdict(item), ensure_ascii=False)
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as fp:
                fp.write(line + "\n")
                fp.flush()
                os.fsync(fp.fileno())
            return self._count()

    def items(self, namespace: str | None = None) -> list[FeedbackItem]:
        with self._lock:
            if not self.path.exists():
                return []
            lines = self.path.read_text(encoding="utf-8").splitlines()
        found = [FeedbackItem(**json.loads(line)) for line in lines if line.strip()]
        return [i for i in found if namespace is None or i.namespace == namespace]

    def _count(self) -> int:
        with self.path.open(encoding="utf-8") as fp:
            return sum(1 for line in fp if line.strip())

    def __len__(self) -> int:
        with self._lock:
            return self._count() if self.path.exists() else 0


def feedback_queue_for(data_dir: Path) -> FeedbackQueue:
    return FeedbackQueue(Path(data_dir) / "feedback" / "ttrl-queue.jsonl")


@dataclass
class _RunFacts:
    question: str
    answer: str
    verdict: str
    memory_id: str | None
    memories_used: list[str]


def _facts_of(runlog: RunLog, namespace: str, run_id: str) -> _RunFacts:
    try:
        events = runlog.load(namespace, run_id)
    except (KeyError, ValueError):
        raise FeedbackError(f"Run {run_id!r} is not in your history; reopen the run from History and try again.") from None
    facts = _RunFacts("", "", "", None, [])
    for event in events:
        if isinstance(event, RunStarted):
            facts.question = event.question
        elif isinstance(event, AnswerReady):
            facts.answer = event.text
        elif isinstance(event, VerdictReady):
            facts.verdict = event.label
        elif isinstance(event, MemoryStored):
            facts.memory_id = event.memory_id
        elif isinstance(event, MemoriesRetrieved):
            facts.memories_used = [m["id"] for m in event.successful + event.failed]
    if not facts.question or not facts.verdict:
        raise FeedbackError("That run did not finish, so there is no answer to give feedback on; run the question again.")
    return facts


def _clean(text: str | None, what: str) -> str | None:
    text = (text or "").strip()
    if len(text) > MAX_FEEDBACK_CHARS:
        raise FeedbackError(f"The {what} is {len(text):,} characters; keep it under {MAX_FEEDBACK_CHARS:,}.")
    return text or None


def submit_feedback(
    *,
    store: MemoryStore,
    runlog: RunLog,
    judge: Judge,
    queue: FeedbackQueue,
    namespace: str,
    run_id: str,
    user: str,
    thumbs: str | None = None,
    right_answer: str | None = None,
    comment: str | None = None,
) -> FeedbackOutcome:
    """Apply feedback on one finished run.

    The new label: with a right answer, the Judge grades the run's answer against it; thumbs up
    (correct) or down (incorrect) are a person's judgement and win over the Judge's. When the label differs from the last one, the
    run's memory is relabelled and the memories the run used get one more outcome with the new
    label (the store counts outcomes; it cannot take back the first one).
    """
    if thumbs is not None and thumbs not in THUMBS:
        raise FeedbackError(f"thumbs must be 'up' or 'down', got {thumbs!r}.")
    right_answer = _clean(right_answer, "right answer")
    comment = _clean(comment, "comment")
    if thumbs is None and right_answer is None and comment is None:
        raise FeedbackError("Give a thumbs up or down, the right answer, or a comment before sending feedback.")
    facts = _facts_of(runlog, namespace, run_id)
    previous = [i for i in queue.items(namespace) if i.run_id == run_id]
    label_before = previous[-1].label_after if previous else facts.verdict

    label_after, method = label_before, "comment only"
    if right_answer is not None:
        verdict = judge.grade(facts.question, facts.answer, right_answer)
        label_after, method = verdict.label, f"the Judge ({verdict.method}) against your right answer"
    if thumbs is not None:
        by_thumbs = CORRECT if thumbs == "up" else INCORRECT
        if right_answer is not None and by_thumbs != label_after:
            method = f"your thumbs {thumbs}; the Judge had said {label_after} against your right answer"
        elif right_answer is None:
            method = f"your thumbs {thumbs}"
        label_after = by_thumbs

    changes: list[str] = []
    if label_after != label_before:
        changes.append(f"Verdict changed from {label_before} to {label_after} ({method}).")
        correct = label_after == CORRECT
        if facts.memory_id is not None:
            try:
                store.relabel(facts.memory_id, namespace=namespace, correct=correct, actor=f"feedback:{user}")
                kind = "successful strategy" if correct else "failure lesson"
                changes.append(f"Memory {facts.memory_id[:8]} relabelled as a {kind}.")
            except MemoryNotFoundError:
                changes.append(f"Memory {facts.memory_id[:8]} no longer exists (deleted), so nothing was relabelled.")
        if facts.memories_used:
            store.record_outcome(facts.memories_used, correct=correct, namespace=namespace, missing_ok=True)
            changes.append(
                f"Win rates of the {len(facts.memories_used)} memories this run used were updated "
                f"with one more {'success' if correct else 'failure'}."
            )
    else:
        changes.append(f"Verdict stays {label_after} ({method}); no memory changed.")

    queued = queue.append(
        FeedbackItem(
            run_id=run_id, namespace=namespace, user=user, question=facts.question, answer=facts.answer,
            thumbs=thumbs, right_answer=right_answer, comment=comment, label_before=label_before,
            label_after=label_after, judge_method=method, memory_id=facts.memory_id,
            memories_used=facts.memories_used,
        )
    )
    changes.append(
        f"Queued for test-time learning ({queued} item{'s' if queued != 1 else ''} waiting). "
        "Test-time learning is not running yet, so the Planner's weights do not change now."
    )
    return FeedbackOutcome(label_before=label_before, label_after=label_after, changes=changes, queued=queued)
