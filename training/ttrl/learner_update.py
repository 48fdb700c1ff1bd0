"""The Planner update: one GRPO (or RFT) step on the scored batch, then the canary decides whether the
new version is promoted (does no worse than the current one) or rejected and the weights restored."""

from __future__ import annotations

import shutil
import time
from dataclasses import asdict

from backend.code_identity import prompts_digest
from training.grpo import group_advantages, grpo_update
from training.policy import PolicyChatModel
from training.ttrl.canary import CanaryResult, evaluate_canary
from training.ttrl.learner_policy import _release
from training.ttrl.rft import rft_update
from training.ttrl.version_folder import ADAPTER, PROMOTED, REJECTED, Version


class PlannerUpdate:
    """TestTimeLearner's updates of the Planner and their canary."""

    @property
    def canary_on(self) -> str:
        return "llamacpp" if self.fast_sampler is not None else "transformers"

    def _canary(self, policy: PolicyChatModel, version: Version) -> CanaryResult:
        """The canary of `version`: on llama.cpp with its adapter when rollouts sample there (greedy, as
        the app answers), else on the trained copy, which holds that version's weights now."""
        planner = self.fast_sampler(version) if self.fast_sampler is not None else policy
        try:
            return evaluate_canary(self.canary, planner_model=self._gated(planner), executor_model=self._canary_executor,
                                   tools=self.tools, settings=self.episode_settings, weights=self.reward_weights)
        finally:
            if planner is not policy:
                _release(planner)

    def update(self) -> Version | None:
        """One GRPO update on the batch, then the canary decides: promote, or reject and restore.

        A batch in which every question's rollouts scored alike carries no GRPO signal (all
        advantages are 0): it is dropped without making a version."""
        policy = self.policy()
        rft = self.settings.learner == "rft"
        rewards = [r for group in self.batch for r in group.rewards]
        advantages = [1.0] * len(rewards) if rft else group_advantages(rewards, self.settings.rollouts_per_signal)
        if not any(advantages):
            self._log("updates.jsonl", {"at": time.time(), "event": "skipped", "signals": len(self.batch),
                                        "reason": "every question's rollouts scored the same: no learning signal"})
            with self._lock:
                self.batch = []
                self._save_batch()
            return None
        parent = self.versions.current()
        if parent.canary_reward is None or (parent.canary_on or "transformers") != self.canary_on:
            self.activity = f"canary: measuring the current Planner ({parent.name})"
            result = self._canary(policy, parent)
            parent.canary_reward, parent.canary_seconds, parent.canary_on = result.reward, result.seconds, self.canary_on
            self.versions.record(parent)
        self.activity = f"updating the Planner on {len(self.batch)} questions"
        started = time.perf_counter()
        before = policy.trainable_state()
        episodes = [e for group in self.batch for e in group.episodes()]
        if rft:
            stats = rft_update(policy.model, self._optimizer, [s for episode in episodes for s in episode],
                               before_each=self.gate.wait)
        else:
            stats = grpo_update(policy.model, self._optimizer, list(zip(episodes, advantages)),
                                temperature=self.settings.temperature, before_each=self.gate.wait)
        update_seconds = time.perf_counter() - started
        staged = self.versions.staging_dir()
        try:
            policy.save_adapter(staged / ADAPTER)
            self.activity = "canary: checking the updated Planner"
            result = self._canary(policy, self.versions.staged_version(staged))
            tolerance = self.settings.canary_tolerance
            passed = result.reward >= parent.canary_reward - tolerance
            rolled_back = self.versions.current().number != parent.number  # a rollback happened meanwhile
            promoted = passed and not rolled_back
            version = self.versions.add(staged, Version(
                number=0, status=PROMOTED if passed else REJECTED, parent=parent.number,
                train_reward=sum(rewards) / len(rewards), canary_reward=result.reward,
                parent_canary_reward=parent.canary_reward, update_seconds=update_seconds,
                canary_seconds=result.seconds, signals=len(self.batch), rollouts=len(rewards),
                prompts=prompts_digest(), canary_on=self.canary_on,
                note=(f"{'RFT' if rft else 'GRPO'} on {stats.tokens} tokens, loss {stats.loss:.4f}; canary {result.correct}/"
                      f"{result.questions} correct, reward {result.reward:.3f} vs {parent.canary_reward:.3f}"
                      + ("; discarded: the Planner was rolled back during the update" if rolled_back else "")),
            ), make_current=promoted)
        finally:
            shutil.rmtree(staged, ignore_errors=True)  # gone already once it became a version
        with self._lock:
            self.batch = []
            self._save_batch()
            if promoted:
                self._policy_version = version.number
            else:
                policy.restore_trainable_state(before)
        self._log("updates.jsonl", {"at": time.time(), "event": "update", **asdict(version)})
        if promoted:
            self._promote(version)
        self.activity = "idle"
        return version
