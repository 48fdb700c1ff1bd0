"""A person's feedback on an answer: relabel the run's memory through the Judge, update the win
rates of the memories the run used, and queue the feedback for test-time learning.

Plain functions over the store, the run log and the Judge; the web UI only calls `submit_feedback`.
The feedback is queued first (backend.feedback_queue), then its memory changes are recorded under
the item's key in one store transaction; `replay_feedback` applies any a crash left out, once.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from backend.feedback_queue import FeedbackItem, FeedbackQueue, QueueWriteError, feedback_queue_for
from backend.judge import CORRECT, INCORRECT, Judge
from backend.replay import replay
from backend.runlog import RunLog
from memory_db import Memory, MemoryNotFoundError, MemoryStore, UnreadableMemoryError

__all__ = ["FeedbackError", "FeedbackItem", "FeedbackOutcome", "FeedbackQueue", "feedback_queue_for",
           "replay_feedback", "submit_feedback"]

log = logging.getLogger(__name__)

THUMBS = ("up", "down")
MAX_FEEDBACK_CHARS = 4000
# What a person's verdict makes of a memory's provenance (the agent marks a Judge-only verdict unverified).
VERIFIED_BY_FEEDBACK = {"verified": True, "verdict_source": "feedback"}


class FeedbackError(ValueError):
    """The feedback cannot be applied; the message says what to do."""


@dataclass
class FeedbackOutcome:
    """What the feedback changed, in sentences for the page."""

    label_before: str
    label_after: str
    changes: list[str]
    queued: int  # how many items of the user's namespace the queue holds after this one


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
    run = replay(events)
    facts = _RunFacts(run.question, run.answer, run.verdict.label if run.verdict else "",
                      run.memory_stored.memory_id if run.memory_stored else None, run.memories_used)
    if not facts.question or not facts.verdict:
        raise FeedbackError("That run did not finish, so there is no answer to give feedback on; run the question again.")
    return facts


def _clean(text: str | None, what: str) -> str | None:
    text = (text or "").strip()
    if len(text) > MAX_FEEDBACK_CHARS:
        raise FeedbackError(f"The {what} is {len(text):,} characters; keep it under {MAX_FEEDBACK_CHARS:,}.")
    return text or None


def _changes_memory(item: FeedbackItem) -> bool:
    """Whether the item's memory changes go through the store: a new label, or a person's verdict
    (thumbs or a right answer) that verifies the memory. Items without a key predate recording."""
    judged = item.thumbs is not None or item.right_answer is not None
    return bool(item.feedback_id) and (item.label_after != item.label_before or judged)


def apply_feedback(store: MemoryStore, item: FeedbackItem) -> bool:
    """Record a queued item's memory changes (at most once: a second call is a no-op); returns
    whether this call applied them. The run's memory gets the new label and is marked verified;
    with a new label, the memories the run used get one more outcome with it."""
    if not _changes_memory(item):
        return False
    return store.record_verdict(
        item.feedback_id, namespace=item.namespace, memory_id=item.memory_id, used_ids=item.memories_used,
        correct=item.label_after == CORRECT, count_outcome=item.label_after != item.label_before,
        provenance_update=VERIFIED_BY_FEEDBACK, actor=f"feedback:{item.user}"[:200],
    )


def replay_feedback(store: MemoryStore, queue: FeedbackQueue, items: list[FeedbackItem] | None = None) -> int:
    """Apply the memory changes of queued items (all of them, or `items`) that a crash between
    queueing and recording left out; returns how many were applied now."""
    pending: dict[str, list[FeedbackItem]] = {}
    for item in queue.items(skip_damaged=True) if items is None else items:
        if _changes_memory(item):
            pending.setdefault(item.namespace, []).append(item)
    applied = 0
    for namespace, waiting in pending.items():
        done = store.recorded_verdicts([i.feedback_id for i in waiting], namespace=namespace)
        for item in waiting:
            if item.feedback_id not in done and apply_feedback(store, item):
                applied += 1
                log.warning("feedback %s on run %s was queued but not applied (a crash?); applied it now",
                            item.feedback_id, item.run_id)
    return applied


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
    (correct) or down (incorrect) are a person's judgement and win over the Judge's. When the label
    differs from the last one, the run's memory is relabelled and the memories the run used get one
    more outcome with the new label (the store counts outcomes; it cannot take back the first one).
    Thumbs or a right answer mark the run's memory verified. The item is queued before any memory
    changes, and those are recorded under its key, so a crash in between is repaired by a replay.
    """
    if thumbs is not None and thumbs not in THUMBS:
        raise FeedbackError(f"thumbs must be 'up' or 'down', got {thumbs!r}.")
    right_answer = _clean(right_answer, "right answer")
    comment = _clean(comment, "comment")
    if thumbs is None and right_answer is None and comment is None:
        raise FeedbackError("Give a thumbs up or down, the right answer, or a comment before sending feedback.")
    facts = _facts_of(runlog, namespace, run_id)
    previous = [i for i in queue.items(namespace, skip_damaged=True) if i.run_id == run_id]
    replay_feedback(store, queue, previous)
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

    item = FeedbackItem(
        run_id=run_id, namespace=namespace, user=user, question=facts.question, answer=facts.answer,
        thumbs=thumbs, right_answer=right_answer, comment=comment, label_before=label_before,
        label_after=label_after, judge_method=method, memory_id=facts.memory_id,
        memories_used=facts.memories_used, feedback_id=uuid.uuid4().hex,
    )
    try:
        queued = queue.append(item)
    except QueueWriteError as exc:
        raise FeedbackError(str(exc)) from None
    apply_feedback(store, item)

    changes: list[str] = []
    memory = _stored(store, facts.memory_id, namespace)
    if label_after != label_before:
        changes.append(f"Verdict changed from {label_before} to {label_after} ({method}).")
        if facts.memory_id is not None:
            if memory is not None:
                kind = "successful strategy" if memory.correct else "failure lesson"
                changes.append(f"Memory {facts.memory_id[:8]} relabelled as a {kind}.")
            else:
                changes.append(f"Memory {facts.memory_id[:8]} no longer exists (deleted), so nothing was relabelled.")
        if facts.memories_used:
            changes.append(
                f"Win rates of the {len(facts.memories_used)} memories this run used were updated "
                f"with one more {'success' if label_after == CORRECT else 'failure'}."
            )
    else:
        confirmed = " and now counts as verified" if memory is not None and _changes_memory(item) else ""
        changes.append(f"Verdict stays {label_after} ({method}); the memory keeps its label{confirmed}."
                       if confirmed else f"Verdict stays {label_after} ({method}); no memory changed.")
    changes.append(
        f"Queued for test-time learning ({queued} of your item{'s' if queued != 1 else ''} waiting). "
        "Test-time learning is not running yet, so the Planner's weights do not change now."
    )
    return FeedbackOutcome(label_before=label_before, label_after=label_after, changes=changes, queued=queued)


def _stored(store: MemoryStore, memory_id: str | None, namespace: str) -> Memory | None:
    if memory_id is None:
        return None
    try:
        return store.get(memory_id, namespace=namespace)
    except (MemoryNotFoundError, UnreadableMemoryError):
        return None
