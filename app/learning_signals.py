"""What test-time learning does with a run and its feedback, in the research page's words: the
learner's state in one sentence, submit_feedback's sentences with that state in place of its
placeholder, and a finished run queued as a learning signal."""

from __future__ import annotations

import logging

from app.session import AppContext
from app.transcript import RunTranscript
from memory_db import MemoryStoreError

log = logging.getLogger(__name__)

NOT_RUNNING_SENTENCE = "Test-time learning is not running yet"


def learning_state_line(ctx: AppContext, namespace: str | None = None) -> str:
    """One sentence on what test-time learning does with feedback right now; with `namespace`, the
    signals counted are that namespace's only (a user with logins sees no one else's)."""
    learner = ctx.learner
    if learner is None and ctx.runtime.config.ttrl.enabled:
        why = (ctx.learning_off_reason or "it was started without its learner").rstrip(". ")
        return f"Queued; test-time learning is not running in this app ({why}): see Learning."
    if learner is None:
        return "Test-time learning is switched off (ttrl.enabled = false in mia.toml); the feedback stays queued."
    status = learner.status()
    pending = learner.pending_count(namespace)
    signals = f"{pending} signal{'s' if pending != 1 else ''} pending"
    version = f"current version v{status.current_version:04d}"
    if not status.enabled:
        return f"Test-time learning is switched off in its settings; {signals} stay queued ({version})."
    if not learner.running:  # disabled, failed or killed: as the Learning view tells it
        return f"Queued ({signals}); the learner is not running: see Learning ({version})."
    if status.paused:
        return (f"Test-time learning is paused (an admin can resume it in the Learning view): {signals}; "
                f"the Planner learns from them once it resumes ({version}).")
    return (f"Test-time learning is on: {signals}; the Planner learns from this in the background ({version}).")


def feedback_changes(ctx: AppContext, changes: list[str], *, thumbs: str | None, right_answer: str,
                     namespace: str | None = None) -> list[str]:
    """submit_feedback's sentences, with its placeholder about learning replaced by the learner's real state."""
    lines = []
    for line in changes:
        cut = line.find(NOT_RUNNING_SENTENCE)
        if cut >= 0:
            line = line[:cut].rstrip()
        if line:
            lines.append(line)
    if not thumbs and not (right_answer or "").strip():
        lines.append("A comment alone gives test-time learning nothing to learn from (give a thumbs or the right "
                     "answer for that); it stays in the queue for people to read.")
    else:
        lines.append(learning_state_line(ctx, namespace))
    return lines


def queue_for_learning(ctx: AppContext, transcript: RunTranscript, question: str, namespace: str, *,
                       finished: bool, ground_truth: str | None, image: str | None) -> str | None:
    """A finished run as a learning signal: with a right answer typed beside the question, a
    ground-truth signal; without one, an unsupervised signal when that is opted into (ttrl.unsupervised).

    Returns a sentence for the trace when the question was queued, else None. Runs with an image are
    skipped: the learner's rollouts see only the question's text.
    """
    if (ctx.learner is None or ctx.read_only or not finished or image or not transcript.run_id
            or not transcript.answer.strip() or not question.strip()):
        return None
    gold = (ground_truth or "").strip()
    if not gold and not ctx.runtime.config.ttrl.unsupervised:
        return None
    from training.ttrl.signals import Signal, SignalError

    kind = "ground_truth" if gold else "unsupervised"
    source = f"{kind}:{transcript.run_id}"
    try:
        signal = Signal(question.strip(), kind, namespace, gold, source)
        ctx.queue.add_signal(source[:64], namespace=namespace, run_id=transcript.run_id, signal=signal.to_dict())
    except (SignalError, MemoryStoreError) as exc:
        log.warning("run %s not queued for test-time learning: %s", transcript.run_id, exc)
        return None
    ctx.learner.wake()
    pending = ctx.learner.pending_count(namespace)
    how = "against your right answer" if gold else "by the Judge's evaluators (unsupervised)"
    waiting = "" if ctx.learner.running else "; the learner is not running: see Learning"
    return (f"Queued for test-time learning: the Planner's rollouts on this question are graded {how}; "
            f"{pending} signal{'s' if pending != 1 else ''} pending{waiting}.")
