"""Stream questions with gold answers through test-time learning, as an evaluation stream or a batch
of feedback would reach the app; resumable (questions already learned from are skipped)."""

from __future__ import annotations

import time
from datetime import datetime

from tqdm.auto import tqdm

from backend.eval.datasets import EvalQuestion
from training.ttrl.learner import TestTimeLearner
from training.ttrl.signals import Signal
from training.ttrl.version_folder import Version


def submit_new(learner: TestTimeLearner, questions: list[EvalQuestion], *, namespace: str) -> int:
    """Submit each question not yet learned from (nor pending) as a ground-truth signal; returns how many."""
    done = {row.get("source") for row in learner.read_log("signals.jsonl")}
    done |= {s.source for s in learner.pending}
    new = [q for q in questions if f"stream:{q.id}" not in done]
    for q in new:
        learner.submit(Signal(q.question, "ground_truth", namespace, q.answer, f"stream:{q.id}"))
    return len(new)


def stream_questions(learner: TestTimeLearner, questions: list[EvalQuestion], *, namespace: str,
                     progress: bool = True) -> int:
    """Submit the new questions and learn until all pending signals are processed; returns how many were new."""
    new = submit_new(learner, questions, namespace=namespace)
    bar = tqdm(total=learner.status().pending, desc="test-time learning", unit="question", disable=not progress)
    while True:
        outcome = learner.work_once()
        if outcome == "processed":
            bar.update(1)
            status = learner.status()
            bar.set_postfix(version=status.current_version, batch=f"{status.batch}/{status.signals_per_update}")
        elif outcome == "budget":
            time.sleep(min(60.0, learner.budget.seconds_until(learner.settings.rollouts_per_signal) + 1))
        else:
            break
    bar.close()
    return new


def versions_table(versions: list[Version], current: int) -> str:
    def num(value: float | None) -> str:
        return "" if value is None else f"{value:.3f}"

    lines = ["| version | status | parent | created | train reward | canary reward (parent) | update s | canary s | signals | rollouts |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for v in versions:
        mark = " (current)" if v.number == current else ""
        parent = "" if v.parent is None else f"v{v.parent:04d}"
        canary = num(v.canary_reward) + (f" ({num(v.parent_canary_reward)})" if v.parent_canary_reward is not None else "")
        lines.append(f"| {v.name}{mark} | {v.status} | {parent} | {datetime.fromtimestamp(v.created):%Y-%m-%d %H:%M} "
                     f"| {num(v.train_reward)} | {canary} | {v.update_seconds:.1f} | {v.canary_seconds:.1f} "
                     f"| {v.signals} | {v.rollouts} |")
    return "\n".join(lines)
