"""A person's feedback on an answer: relabel the run's memory through the Judge, update the win
rates of the memories the run used, and queue the feedback for test-time learning.

Plain functions over the store, the run log and the Judge; the web UI only calls `submit_feedback`.
The feedback is queued (backend.feedback_queue, in the memory database) in the same transaction
that records its memory changes under the item's key: both are written, or neither.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from backend.feedback_queue import FEEDBACK, FeedbackItem, FeedbackQueue, QueueWriteError
from backend.judge import CORRECT, INCORRECT, Judge
from backend.labels import feedback_words, person_how
from backend.question import Question
from backend.replay import replay
from backend.runlog import RunLog
from backend.taught import THUMBS_UP, TYPED, evidence_in_run, find_evidence, taught_fields
from backend.tools.base import Tool
from memory_db import Memory, MemoryNotFoundError, MemoryStore, UnreadableMemoryError
from memory_db.provenance import provenance_update

__all__ = ["FeedbackError", "FeedbackItem", "FeedbackOutcome", "FeedbackQueue", "import_queue_file", "open_feedback_queue",
           "submit_feedback"]

log = logging.getLogger(__name__)

THUMBS = ("up", "down")
MAX_FEEDBACK_CHARS = 4000
# What a person's verdict makes of a memory's provenance (the agent marks a Judge-only verdict unverified).
VERIFIED_BY_FEEDBACK = provenance_update(verified=True, verdict_source="feedback")


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
    events: list


def _facts_of(runlog: RunLog, namespace: str, run_id: str) -> _RunFacts:
    try:
        events = runlog.load(namespace, run_id)
    except (KeyError, ValueError):
        raise FeedbackError(f"Run {run_id!r} is not in your history; reopen the run from History and try again.") from None
    run = replay(events)
    facts = _RunFacts(run.question, run.answer, run.verdict.label if run.verdict else "",
                      run.memory_stored.memory_id if run.memory_stored else None, run.memories_used, events)
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


def taught_answer(item: FeedbackItem) -> tuple[str, str] | None:
    """(answer, how) a person taught with this feedback: a typed right answer, or the run's answer given
    a thumbs up; None for a thumbs down or a comment alone."""
    if item.right_answer:
        return item.right_answer, TYPED
    if item.thumbs == "up" and item.answer.strip():
        return item.answer.strip(), THUMBS_UP
    return None


def verdict_of(item: FeedbackItem, evidence: dict | None = None) -> dict | None:
    """The memory changes a queued item makes (MemoryStore.record_verdict's arguments but the key),
    or None: the run's memory gets the new label and is marked verified, and keeps the answer the
    person taught (with `evidence`: where a source states it); with a new label, the memories the run
    used get one more outcome with it."""
    if not _changes_memory(item):
        return None
    provenance = {**VERIFIED_BY_FEEDBACK, **provenance_update(
        feedback_label=item.label_after, feedback_how=person_how(item.label_after, right_answer=item.right_answer))}
    taught = taught_answer(item)
    if taught is not None:
        provenance.update(taught_fields(answer=taught[0], user=item.user, at=item.at, how=taught[1], evidence=evidence))
    return dict(memory_id=item.memory_id, used_ids=item.memories_used, correct=item.label_after == CORRECT,
                count_outcome=item.label_after != item.label_before, provenance_update=provenance,
                actor=f"feedback:{item.user}"[:200])


def legacy_queue_file(data_dir: Path) -> Path:
    """Where versions before the database queue kept it (a JSON-lines file)."""
    return Path(data_dir) / "feedback" / "ttrl-queue.jsonl"


def import_queue_file(store: MemoryStore, data_dir: Path) -> int:
    """Move an older app's queue file into the database, once: each complete line becomes an entry
    (with the memory changes a crash may have left unrecorded, applied once); the lines its learner had
    read (the cursor in ttrl/state.json) come in as taken. The file is renamed `.imported`. Returns how
    many entries were added."""
    path = legacy_queue_file(data_dir)
    if not path.is_file():
        return 0
    state_path = Path(data_dir) / "ttrl" / "state.json"
    try:
        read = int(json.loads(state_path.read_text(encoding="utf-8")).get("feedback_cursor", 0)) if state_path.is_file() else 0
    except (ValueError, TypeError, AttributeError):
        read = 0
    added = 0
    lines = path.read_bytes().split(b"\n")
    lines.pop()  # after the last newline: empty, or a line a crash cut short (kept in the renamed file)
    for number, line in enumerate(line for line in lines if line.strip()):
        try:
            item = FeedbackItem(**json.loads(line.decode("utf-8")))
        except (ValueError, TypeError) as exc:
            log.warning("%s: line %d is damaged (%s); left out of the database queue", path, number + 1, exc)
            continue
        key = item.feedback_id or hashlib.sha256(line).hexdigest()[:32]
        if not item.feedback_id:
            item.feedback_id = key
            verdict = None  # written before verdicts were recorded: its changes were applied then
        else:
            verdict = verdict_of(item)
        if store.enqueue(key, namespace=item.namespace, kind=FEEDBACK, run_id=item.run_id, item=asdict(item),
                         verdict=verdict, taken_by="learner (before the database queue)" if number < read else None):
            added += 1
    try:
        path.rename(path.with_name(path.name + ".imported"))
    except FileNotFoundError:  # another process imported it at the same time (every entry once, by key)
        pass
    log.info("moved %d feedback items from %s into the database queue", added, path)
    return added


def open_feedback_queue(store: MemoryStore, data_dir: Path, *, writable: bool = True) -> FeedbackQueue:
    """The deployment's queue; a writable opener first moves an older app's queue file into it."""
    if writable:
        import_queue_file(store, data_dir)
    return FeedbackQueue(store)


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
    search: Tool | None = None,
) -> FeedbackOutcome:
    """Apply feedback on one finished run.

    The new label: with a right answer, the Judge grades the run's answer against it; thumbs up
    (correct) or down (incorrect) are a person's judgement and win over the Judge's. When the label
    differs from the last one, the run's memory is relabelled and the memories the run used get one
    more outcome with the new label (the store counts outcomes; it cannot take back the first one).
    Thumbs or a right answer mark the run's memory verified, and the memory keeps the answer the
    person taught (a typed right answer, or the answer given a thumbs up): the same question or a
    rewording starts from it next time (backend.taught). With `search`, the corpus is searched for
    where it is stated, and the memory keeps that search. The item is queued in the transaction that
    makes those changes.
    """
    if thumbs is not None and thumbs not in THUMBS:
        raise FeedbackError(f"thumbs must be 'up' or 'down', got {thumbs!r}.")
    right_answer = _clean(right_answer, "right answer")
    comment = _clean(comment, "comment")
    if thumbs is None and right_answer is None and comment is None:
        raise FeedbackError("Give a thumbs up or down, the right answer, or a comment before sending feedback.")
    facts = _facts_of(runlog, namespace, run_id)
    question = Question.parse(facts.question)
    previous = queue.items(namespace, run_id=run_id, skip_damaged=True)
    label_before = previous[-1].label_after if previous else facts.verdict

    label_after, method = label_before, "comment only"
    if right_answer is not None:
        verdict = judge.grade(question, facts.answer, right_answer)
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
    taught = taught_answer(item)
    evidence = None
    if taught is not None and facts.memory_id:
        evidence = evidence_in_run(facts.events, question, taught[0]) or find_evidence(search, question, taught[0])
    try:
        queued = queue.submit(item, verdict_of(item, evidence))
    except QueueWriteError as exc:
        raise FeedbackError(str(exc)) from None

    changes: list[str] = []
    memory = _stored(store, facts.memory_id, namespace)
    words = feedback_words(item)  # the label every view of this run and its memory now shows
    if label_after != label_before:
        changes.append(f"Verdict changed from {label_before} to {words} ({method}).")
        if facts.memory_id is not None:
            if memory is not None:
                kind = "successful strategy" if memory.correct else "failure lesson"
                changes.append(f"Memory {facts.memory_id[:8]} relabelled as a {kind}: {words}.")
            else:
                changes.append(f"Memory {facts.memory_id[:8]} no longer exists (deleted), so nothing was relabelled.")
        if facts.memories_used:
            changes.append(
                f"Win rates of the {len(facts.memories_used)} memories this run used were updated "
                f"with one more {'success' if label_after == CORRECT else 'failure'}."
            )
    else:
        confirmed = " and now counts as verified" if memory is not None and _changes_memory(item) else ""
        changes.append(f"Verdict stays {words} ({method}); the memory keeps its label{confirmed}."
                       if confirmed else f"Verdict stays {words} ({method}); no memory changed.")
    if taught is not None and memory is not None:
        where = (f" A source states it: {evidence['title']} (\"{evidence['sentence']}\"), found by searching "
                 f"'{evidence['query']}'." if evidence else " No source searched states it yet.")
        changes.append(f"Remembered '{taught[0]}' as the answer: this question, or a rewording of it, starts "
                       f"from it next time.{where}")
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
