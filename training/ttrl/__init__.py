"""Test-time learning (the paper's TTRL) in the live app: signals -> Planner rollouts -> memories and
GRPO updates of the Planner's LoRA, promoted through a canary, in a background worker."""

from training.ttrl.learner import LearnerStatus, TestTimeLearner
from training.ttrl.signals import Signal, SignalError, signal_from_feedback
from training.ttrl.version_folder import Version
from training.ttrl.versions import VersionStore

__all__ = [
    "LearnerStatus",
    "Signal",
    "SignalError",
    "TestTimeLearner",
    "Version",
    "VersionStore",
    "signal_from_feedback",
]
