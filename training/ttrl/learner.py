"""The test-time learner: a background worker that turns signals into memories and Planner updates.

Never in the request path: the app keeps answering with the current Planner while this worker
samples rollouts with its own copy of the Planner (the policy) and trains it. The worker loop:

1. take new entries of the learning queue in the database (people's feedback, questions to learn
   from) into pending signals, saved in ``state.json`` before the entries are marked taken;
2. if the hourly rollout budget allows, take the oldest signal: the policy proposes n plans, the
   frozen Executor runs them, the Judge grades them; the Manager stores the shortest correct and
   one incorrect trajectory (non-parametric side);
3. when ``signals_per_update`` signals are scored, one GRPO update of the Planner's LoRA; the new
   version is evaluated on the canary and promoted only if it does not do worse than the current
   one; ``on_promote`` then swaps it into the app (between questions).

Pending signals and the scored batch survive a restart (``state.json``, ``batch.jsonl``). A learner
stopped between saving its signals and marking their entries taken reads those entries again and
drops them (one signal per run: a repeat teaches what the pending or learned one does). An entry
that cannot be read is quarantined (kept in the queue with its reason, never read again) and the
Learning view says so; the entries after it are taken as usual. A signal whose Planner cannot be
loaded (PlannerUnavailable: the learner's fault, not the signal's) stays pending with the error
recorded, and is tried again when the current version changes or after UNLOADABLE_RETRY_S.

A worker's learner holds the lease's fence (``fence``): each of its writes checks it, in the database
transaction that marks entries taken, and around the rename of each file it writes (state, batch,
logs, versions), so a learner that stalled past its lease and woke up after another took over
stops (LeaseLost) without writing. One window remains: memories a rollout stores go through the
store's own transactions, so the fence is checked just before them, not with them.

Its parts: learner_files (state, batch, logs), learner_intake (the queue into pending signals),
learner_loop (the thread and one unit of work), learner_policy (the trained Planner), learner_rollouts
(one signal's rollouts and memories), learner_update (the update and its canary).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from backend.config import LearningConfig, PlannerRewardConfig
from backend.judge import Judge
from backend.llm.base import ChatModel
from backend.llm.llamacpp import LlamaCppChatModel
from backend.llm.memo import CallFile, RepeatedCalls
from backend.manager import Manager
from backend.tools.base import Tool
from memory_db import LeaseFence
from training.episode import EpisodeSettings
from training.policy import PolicyChatModel
from training.ttrl.budget import RolloutBudget
from training.ttrl.canary import load_canary
from training.ttrl.fast_sampler import LlamaCppPolicy
from training.ttrl.gate import GatedModel, YieldGate
from training.ttrl.learner_files import LearnerFiles, _Group
from training.ttrl.learner_intake import SignalIntake
from training.ttrl.learner_loop import LearnerLoop
from training.ttrl.learner_policy import PlannerPolicy
from training.ttrl.learner_rollouts import SignalRollouts
from training.ttrl.learner_update import PlannerUpdate
from training.ttrl.signals import Signal
from training.ttrl.version_folder import Version
from training.ttrl.versions import VersionStore

log = logging.getLogger(__name__)


def learner_owner() -> str:
    """Who a learner is, in the queue and the lease: host, process and a random part."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def owner_is_gone(owner: str) -> bool:
    """Whether `owner` (as learner_owner writes it) was a process of this machine that has ended."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # alive, another user's
        return False
    return False


@dataclass
class LearnerStatus:
    enabled: bool
    paused: bool
    activity: str
    pending: int
    batch: int
    signals_per_update: int
    budget_left: int
    rollouts_per_hour: int
    current_version: int
    versions: list[Version]
    last_error: str = ""
    updates_running: bool = False
    quarantined: str = ""  # quarantine_note: queue entries the learner could not read and set aside
    version_notes: list[str] = field(default_factory=list)  # VersionStore.notes: versions set aside, unknown keys
    answering: int | None = None  # the version this app process answers with (None: this process serves none)
    load_problem: str = ""  # why the app process does not answer with the current version


class TestTimeLearner(LearnerFiles, SignalIntake, LearnerLoop, PlannerPolicy, SignalRollouts,
                      PlannerUpdate):
    __test__ = False  # not a pytest test class, despite the name

    def __init__(
        self,
        settings: LearningConfig,
        *,
        root: Path,
        planner_base_dir: Path | Callable[[], Path],
        executor_model: ChatModel,
        judge_model: ChatModel | None,
        manager: Manager,
        tools: Mapping[str, Tool],
        canary_path: Path,
        feedback_queue=None,
        on_promote: Callable[[Version], None] | None = None,
        memory_k: int = 2,
        guided: bool = True,
        app_settings: EpisodeSettings | None = None,
        reward_weights: PlannerRewardConfig = PlannerRewardConfig(),
        clock: Callable[[], float] = time.time,
        gate: YieldGate | None = None,
        owner: str | None = None,
        fast_sampler: Callable[[Version], LlamaCppChatModel] | None = None,
    ) -> None:
        """`app_settings`: the app's episode settings (its memory retrieval; then `memory_k` and
        `guided` come from it); a rollout is shorter than a user's run (ttrl.max_turns, max_new_tokens).
        `gate`: every model call of rollouts and canary waits at it while users' questions run.
        `fast_sampler(version)`: the llama.cpp model answering with that Planner version; rollouts are
        then sampled on it and only scored by the trained copy (ttrl.sampler = "llamacpp")."""
        self.settings = settings
        self.fast_sampler = fast_sampler
        self._sampler: tuple[int, LlamaCppPolicy] | None = None
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        # A callable is resolved when the policy is first built (preparing the weights may take minutes).
        self._planner_base = planner_base_dir
        self._users_running = 0  # users' questions running in this process (the thread learner gives way)
        self.gate = gate or YieldGate(lambda: self._users_running > 0, check_s=0.2)
        self.executor_model = self._gated(executor_model)
        # The canary's Executor turns are greedy and the Executor is never trained: where a new version plans
        # a canary question as its parent did, its Executor turns are the parent's, answered from them.
        self.shared_executor_calls = CallFile(settings.shared_executor_calls) if settings.shared_executor_calls else None
        self._canary_executor = RepeatedCalls(self.executor_model, shared=self.shared_executor_calls)
        self.judge = Judge(self._gated(judge_model), require_overlap=True) if judge_model is not None else None
        self.manager = manager
        self.tools = dict(tools)
        self.canary = load_canary(canary_path, settings.canary_size)
        self.feedback_queue = feedback_queue  # backend.feedback_queue.FeedbackQueue (the database's)
        self.owner = owner or learner_owner()
        # A worker's hold on the learner lease (set by training.ttrl.worker); None: a learner alone by
        # construction (the app's own thread, a test), whose writes check nothing.
        self.fence: LeaseFence | None = None
        self.on_promote = on_promote
        self.versions = VersionStore(self.root, hold=self._holding)
        self.reward_weights = reward_weights
        self.episode_settings = replace(
            app_settings or EpisodeSettings(memory_k=memory_k, guided=guided),
            max_turns=settings.max_turns, executor_max_new_tokens=settings.max_new_tokens,
            planner_max_new_tokens=settings.max_new_tokens, reflections=1,
        )
        self.memory_k = self.episode_settings.memory_k
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._policy: PolicyChatModel | None = None
        self._policy_version = 0  # the version the policy's weights started from
        self._optimizer: torch.optim.Optimizer | None = None
        self.activity = "idle"
        self.last_error = ""
        self.quarantined = self._quarantine_note()
        self.answering: Version | None = None  # the app's Planner, where this learner serves one (live.build_learner)
        self.load_problem = ""
        self._unloadable: tuple[int, float] | None = None  # (version, when) a Planner failed to load for training
        state = self._read_state()
        self.paused: bool = state.get("paused", False)
        self.pending: list[Signal] = [Signal(**s) for s in state.get("pending", [])]
        # What each run's feedback last taught ("kind:answer" by source), so a repeated thumb is one signal.
        self.learned_from: dict[str, str] = dict(state.get("learned_from", {}))
        self.budget = RolloutBudget(settings.rollouts_per_hour, clock=clock, spent=state.get("budget", []))
        self.batch: list[_Group] = self._read_batch()
        # Stopped after a signal's group reached the batch but before the signal left `pending`: it is done.
        scored = [g.signal for g in self.batch]
        self.pending = [s for s in self.pending if s.to_dict() not in scored]

    def _gated(self, model):
        return GatedModel(model, self.gate) if self.gate is not None and model is not None else model

    # -- controls ---------------------------------------------------------------------------------
    def pause(self) -> None:
        with self._lock:
            self.paused = True
            self._save_state()

    def resume(self) -> None:
        with self._lock:
            self.paused = False
            self._save_state()
            self._wake.set()

    def rollback(self, number: int) -> Version:
        """Make an earlier promoted version (0 = the base model) current, in the app and for training."""
        with self._lock:
            version = self.versions.make_current(number)
            self._policy, self._optimizer = None, None  # reloaded from the new current version
            self._log("updates.jsonl", {"at": time.time(), "event": "rollback", "version": number})
        self._promote(version)
        return version

    def _promote(self, version: Version) -> None:
        """Hand a version that became current to on_promote (the app swaps it in, or the worker prepares it)."""
        if self.on_promote is not None:
            self.on_promote(version)
        if self.answering is not None:
            self.answering, self.load_problem = version, ""

    def answer_with(self, version: Version) -> None:
        """In the app's process (the thread learner, `answering` set): answer with `version` from now on,
        or, when it cannot be loaded, keep the Planner that answers and say why (status().load_problem)."""
        try:
            self._promote(version)
        except Exception as exc:
            log.exception("loading Planner %s into the app", version.name)
            keeping = self.answering.name if self.answering is not None else "the base model"
            self.load_problem = (f"Planner {version.name} could not be loaded ({type(exc).__name__}: {exc}); "
                                 f"{keeping} answers instead. Roll back to a version that loads.")

    def status(self) -> LearnerStatus:
        with self._lock:
            return LearnerStatus(
                enabled=self.settings.enabled, paused=self.paused, activity=self.activity,
                pending=len(self.pending), batch=len(self.batch), signals_per_update=self.settings.signals_per_update,
                budget_left=self.budget.left(), rollouts_per_hour=self.settings.rollouts_per_hour,
                current_version=self.versions.current().number, versions=self.versions.all(),
                last_error=self.last_error, updates_running=self.activity.startswith(("updating", "canary")),
                quarantined=self.quarantined, version_notes=self.versions.notes(),
                answering=self.answering.number if self.answering is not None else None,
                load_problem=self.load_problem,
            )

    # What the app tells its learner (the same calls as training.ttrl.remote.RemoteLearner's).
    def user_run_started(self) -> None:
        with self._lock:
            self._users_running += 1

    def user_still_running(self) -> None:
        """Nothing to renew in one process: the count holds until user_run_finished."""

    def user_run_finished(self) -> None:
        with self._lock:
            self._users_running = max(0, self._users_running - 1)

    def sync(self) -> None:
        """Nothing to pick up: a promoted version reaches this process through on_promote."""

    def wake(self) -> None:
        """Something was queued: poll now instead of after poll_seconds."""
        self._wake.set()
