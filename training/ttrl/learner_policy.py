"""The Planner being trained: its copy in torch (the policy, with its optimizer), loaded from the
current version when memory allows, and what samples the rollouts (that copy, or llama.cpp with the
current version's adapter). A Planner that cannot be loaded is the learner's fault, not the signal's
(PlannerUnavailable): the signal waits (see training.ttrl.learner)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import torch

from memory_db import LeaseLost
from training.policy import LoraSettings, PolicyChatModel
from training.ttrl.fast_sampler import LlamaCppPolicy
from training.ttrl.memory_fit import NotEnoughMemory, learner_need, require_memory

# The learner's one logger, whichever of its modules logs (as in worker.log: "training.ttrl.learner: ...").
log = logging.getLogger("training.ttrl.learner")

UNLOADABLE_RETRY_S = 300.0  # how long a Planner version that failed to load is not tried again


class PlannerUnavailable(RuntimeError):
    """The Planner being trained could not be loaded; the message says what to do. Signals wait."""


class PlannerPolicy:
    """TestTimeLearner's trained Planner and rollout sampler."""

    def planner_base_dir(self) -> Path:
        if callable(self._planner_base):
            self._planner_base = Path(self._planner_base())
        return Path(self._planner_base)

    def _loaded_policy(self) -> PolicyChatModel:
        return self._loading(self.policy)

    def _loading(self, load: Callable):
        """`load()` (the policy, or the model that samples rollouts), or PlannerUnavailable saying which
        version failed to load and what to do."""
        try:
            return load()
        except (LeaseLost, NotEnoughMemory):
            raise
        except Exception as exc:
            version = self.versions.current()
            log.exception("loading Planner %s for training", version.name)
            raise PlannerUnavailable(
                f"The Planner being trained ({version.name}) could not be loaded ({type(exc).__name__}: {exc}). "
                f"Signals wait in the queue; roll back to a version that loads in the Learning view (or "
                f"`python -m training ttrl --rollback N`), or fix the cause; learning tries again in "
                f"{UNLOADABLE_RETRY_S / 60:.0f} minutes or when the current version changes.") from exc

    def policy(self) -> PolicyChatModel:
        if self._policy is not None and self.versions.current().number != self._policy_version:
            self._policy, self._optimizer = None, None  # rolled back from another process (the app)
        if self._policy is None:
            current = self.versions.current()
            base_dir = self.planner_base_dir()
            require_memory(learner_need(base_dir, self.settings.weights_dtype))  # NotEnoughMemory says what is free
            self._policy_version = current.number
            self._policy = PolicyChatModel(
                base_dir, temperature=self.settings.temperature,
                lora=LoraSettings(r=self.settings.lora_r, alpha=self.settings.lora_alpha),
                adapter_dir=current.adapter_path, dtype=getattr(torch, self.settings.weights_dtype),
                seed=0,  # as the llama.cpp sampler (FastSampler): each version samples from the same seed
            )
            self._optimizer = torch.optim.AdamW(self._policy.trainable_parameters(), lr=self.settings.learning_rate,
                                                weight_decay=0.0)
        return self._policy

    def _rollout_policy(self, policy: PolicyChatModel):
        """What samples the rollouts: the trained copy, or llama.cpp with the current version's adapter."""
        if self.fast_sampler is None:
            return policy
        version = self.versions.current()
        if self._sampler is None or self._sampler[0] != version.number:
            if self._sampler is not None:
                _release(self._sampler[1].model)
            self._sampler = (version.number, LlamaCppPolicy(self.fast_sampler(version),
                                                            temperature=self.settings.temperature))
        return self._sampler[1]


def _release(model) -> None:
    """Free a Planner version's llama.cpp contexts and adapter once it no longer samples. The base
    Planner (version 0, no adapter) is the app's shared model and stays; so does a model without
    release() (tests' stand-ins)."""
    if getattr(model, "adapter_path", None) is not None and hasattr(model, "release"):
        model.release()
