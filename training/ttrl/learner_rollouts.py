"""One signal's turn: the policy proposes n plans, the frozen Executor runs them, the Judge grades them;
the Manager stores the shortest correct and one incorrect trajectory, and what the update learns from
joins the batch: every rollout with its reward (GRPO), or the rollouts graded correct and, for
feedback on a run, that run's verified plan (RFT, training.ttrl.rft)."""

from __future__ import annotations

import time
from dataclasses import asdict

from backend.config import SELECTIONS
from backend.tools.base import tool_names_line
from training.ttrl.learner_files import _Group
from training.ttrl.learner_intake import _about_a_run
from training.ttrl.rft import FEEDBACK_PREFIX, plan_sample, successful_memory
from training.ttrl.rollouts import SignalOutcome, consolidate, memory_context, rollout_stats, run_rollouts
from training.ttrl.selection import Rollouts, select_reported
from training.ttrl.signals import Signal, SignalGrader


class SignalRollouts:
    """TestTimeLearner's processing of one signal (`process`)."""

    def process(self, signal: Signal) -> SignalOutcome:
        """Rollouts for one signal, memory consolidation, and the group added to the batch."""
        if self.settings.learner == "rft" and signal.source.startswith(FEEDBACK_PREFIX):
            return self._process_rft(signal)
        started = time.perf_counter()
        self.activity = f"rolling out {self.settings.rollouts_per_signal} plans for: {signal.question[:80]}"
        policy = self._loaded_policy()
        sampler = self._loading(lambda: self._rollout_policy(policy))
        shown = memory_context(self.manager, signal, self.episode_settings)
        used = shown.used
        grader = SignalGrader(signal, self.judge)
        self.budget.spend(self.settings.rollouts_per_signal)
        rollouts = run_rollouts(signal, policy=self._gated(sampler),
                                executor_model=self.executor_model, tools=self.tools,
                                grader=grader, settings=self.episode_settings, memory_text=shown.text,
                                n=self.settings.rollouts_per_signal, weights=self.reward_weights,
                                shared_calls=self.shared_executor_calls)
        version = self.versions.current().name
        selected = self._selected(signal, rollouts, shown.successful_plans)  # before this question's memories exist
        reported = selected[self.settings.selection]
        self._check_fence()  # the store's own transactions write the memories (the window the module names)
        stored = consolidate(signal, rollouts, manager=self.manager, memories_used=used, version=version)
        outcome = SignalOutcome(signal, rollouts, used, stored, time.perf_counter() - started)
        group = self._group_of(signal, rollouts)
        if group is not None:
            with self._lock:
                self.batch.append(group)
                self._save_batch()
        self._log("signals.jsonl", {
            "at": time.time(), "question": signal.question, "kind": signal.kind, "source": signal.source,
            "namespace": signal.namespace, "planner_version": version, "learner": self.settings.learner,
            "rewards": [r.reward.total for r in rollouts],
            "answers": [r.episode.answer for r in rollouts], "correct": outcome.correct_count,
            "selection": self.settings.selection, "reported": rollouts[reported].episode.answer,
            "reported_correct": rollouts[reported].episode.correct_final if signal.kind == "ground_truth" else None,
            "selected": {how: {"answer": rollouts[i].episode.answer,
                               "correct": rollouts[i].episode.correct_final if signal.kind == "ground_truth" else None}
                         for how, i in selected.items()},
            "memories_stored": stored, "memories_used": used, "seconds": round(outcome.seconds, 2),
            "rollout_stats": [rollout_stats(r) for r in rollouts],
        })
        return outcome

    def _selected(self, signal: Signal, rollouts: list, successful_plans: list[str]) -> dict[str, int]:
        """The rollout each way of selecting (training.ttrl.selection) reports, chosen without the ground
        truth: every way for a stream's question, so its table pairs them on the same rollouts; the
        configured one for a signal about an app's run, whose answer was given already."""
        embedder = getattr(self.manager.store, "embedder", None)
        seen = Rollouts(question=signal.question, answers=[r.episode.answer for r in rollouts],
                        plans=["\n".join(r.episode.plan_texts) for r in rollouts],
                        passages=[r.episode.passages for r in rollouts])
        ways = (self.settings.selection,) if _about_a_run(signal) else SELECTIONS
        return {how: select_reported(seen, how=how, past_plans=successful_plans,
                                     embed=embedder.encode if embedder is not None else None, reader=self.executor_model)
                for how in ways}

    def _group_of(self, signal: Signal, rollouts: list) -> _Group | None:
        """What a signal's rollouts add to the batch: every rollout with its reward (GRPO), the rollouts
        graded correct as examples (RFT), or nothing (learner "none": rollouts, selection and memory only)."""
        if self.settings.learner == "none":
            return None
        if self.settings.learner == "rft":
            correct = [r for r in rollouts if r.episode.correct_final and signal.kind == "ground_truth"]
            if not correct:
                return None
            return _Group(signal=signal.to_dict(), rewards=[1.0] * len(correct),
                          samples=[[asdict(s) for s in r.samples] for r in correct])
        return _Group(signal=signal.to_dict(), rewards=[r.reward.total for r in rollouts],
                      samples=[[asdict(s) for s in r.samples] for r in rollouts])

    def _process_rft(self, signal: Signal) -> SignalOutcome:
        """RFT: the plan of the signal's run, when its memory is a verified success, joins the batch as
        one supervised example; no rollouts run."""
        started = time.perf_counter()
        self.activity = f"reading the verified plan for: {signal.question[:80]}"
        memory = successful_memory(self.manager, signal)
        version = self.versions.current().name
        sample = None if memory is None else plan_sample(self._loaded_policy(), self.manager, memory, settings=self.episode_settings,
                                                         tools_text=tool_names_line(self.tools.values()))
        samples = [] if sample is None else [asdict(sample)]
        if samples:
            with self._lock:
                self.batch.append(_Group(signal=signal.to_dict(), rewards=[1.0], samples=[samples]))
                self._save_batch()
        self._log("signals.jsonl", {
            "at": time.time(), "question": signal.question, "kind": signal.kind, "source": signal.source,
            "namespace": signal.namespace, "planner_version": version, "learner": "rft",
            "rewards": [1.0] if samples else [], "answers": [], "correct": len(samples),
            "memory": memory.id if memory is not None else None,
            "note": ("" if samples else "no verified successful plan to learn from" if memory is None
                     else f"its run's plan is not of the shape the Planner now writes ({self.episode_settings.plan_shape})"),
            "seconds": round(time.perf_counter() - started, 2),
        })
        return SignalOutcome(signal, [], [], [], time.perf_counter() - started)
