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
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from backend.code_identity import prompts_digest
from backend.config import SELECTIONS, LearningConfig, PlannerRewardConfig
from backend.judge import Judge
from backend.llm.base import ChatModel
from backend.llm.llamacpp import LlamaCppChatModel
from backend.llm.memo import CallFile, RepeatedCalls
from backend.manager import Manager
from backend.tools.base import Tool, tool_names_line
from memory_db import LeaseFence, LeaseLost
from training.episode import EpisodeSettings
from training.grpo import group_advantages, grpo_update
from training.policy import LoraSettings, PolicyChatModel, TurnSample
from training.ttrl.budget import RolloutBudget
from training.ttrl.canary import CanaryResult, evaluate_canary, load_canary
from training.ttrl.gate import GatedModel, YieldGate
from training.ttrl.memory_fit import NotEnoughMemory, learner_need, require_memory
from training.ttrl.fast_sampler import LlamaCppPolicy
from training.ttrl.rft import FEEDBACK_PREFIX, plan_sample, rft_update, successful_memory
from training.ttrl.selection import Rollouts, select_reported
from training.ttrl.rollouts import SignalOutcome, consolidate, memory_context, rollout_stats, run_rollouts
from training.ttrl.signals import Signal, SignalGrader, queued_signals, signal_of_entry
from training.ttrl.atomic_files import write_atomically, write_json_atomically
from training.ttrl.version_folder import ADAPTER, PROMOTED, REJECTED, Version
from training.ttrl.versions import VersionStore

log = logging.getLogger(__name__)

QUARANTINE_SHOWN = 3  # quarantined queue entries the status names (newest first)
UNLOADABLE_RETRY_S = 300.0  # how long a Planner version that failed to load is not tried again


class PlannerUnavailable(RuntimeError):
    """The Planner being trained could not be loaded; the message says what to do. Signals wait."""


def _run_key(signal: Signal) -> str:
    """Which run a signal is about (one signal per run)."""
    return f"{signal.namespace}|{signal.source}"


def _about_a_run(signal: Signal) -> bool:
    """Signals from the app name their run (feedback:, ground_truth:, unsupervised:); a stream's are each their own."""
    return not signal.source.startswith("stream:")


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


def _lesson(signal: Signal) -> str:
    """What the signal teaches, to tell a repeated thumb from a correction."""
    return f"{signal.kind}:{signal.answer}"


def quarantine_note(count: int, newest_problems: list[str]) -> str:
    """The sentence the Learning view shows about quarantined queue entries ("" when there are none)."""
    if not count:
        return ""
    more = f"; and {count - len(newest_problems)} more" if count > len(newest_problems) else ""
    return f"{count} queue row{'s' if count != 1 else ''} quarantined: {'; '.join(newest_problems)}{more}"


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


@dataclass
class _Group:
    """One signal's scored rollouts, kept until the GRPO update that uses them."""

    signal: dict
    rewards: list[float]
    samples: list[list[dict]] = field(default_factory=list)

    def episodes(self) -> list[list[TurnSample]]:
        return [[TurnSample(s["prompt_ids"], s["completion_ids"]) for s in rollout] for rollout in self.samples]


class TestTimeLearner:
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

    def _holding(self) -> AbstractContextManager:
        """The context this learner's file changes are made in: the lease's fence, when it holds one."""
        return self.fence.holding() if self.fence is not None else nullcontext()

    def _check_fence(self) -> None:
        if self.fence is not None:
            self.fence.verify()

    # -- persistence ------------------------------------------------------------------------------
    @property
    def _state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def _batch_path(self) -> Path:
        return self.root / "batch.jsonl"

    def _read_state(self) -> dict:
        return json.loads(self._state_path.read_text(encoding="utf-8")) if self._state_path.exists() else {}

    def _save_state(self) -> None:
        write_json_atomically(self._state_path, {
            "paused": self.paused,
            "pending": [s.to_dict() for s in self.pending], "budget": self.budget.spent_times(),
            "learned_from": self.learned_from,
        }, self._holding)

    def _read_batch(self) -> list[_Group]:
        if not self._batch_path.exists():
            return []
        return [_Group(**json.loads(line)) for line in self._batch_path.read_text(encoding="utf-8").splitlines() if line]

    def _save_batch(self) -> None:
        write_atomically(self._batch_path, "".join(json.dumps(asdict(g)) + "\n" for g in self.batch), self._holding)

    def _log(self, name: str, record: dict) -> None:
        line = json.dumps(record, ensure_ascii=False) + "\n"
        with self._holding(), (self.root / name).open("a", encoding="utf-8") as fp:
            fp.write(line)

    def read_log(self, name: str) -> list[dict]:
        path = self.root / name
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    # -- controls ---------------------------------------------------------------------------------
    def submit(self, signal: Signal) -> int:
        """Queue a signal (an evaluation stream's gold answer, an unsupervised run); returns pending count."""
        with self._lock:
            self.pending.append(signal)
            self._save_state()
            self._wake.set()
            return len(self.pending)

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

    # -- the worker -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether the background worker is alive (start() was called and it has not stopped)."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="test-time-learning", daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                outcome = self.work_once()
            except Exception as exc:  # e.g. an unreadable queue: keep the app up, say why, retry later
                log.exception("test-time learning worker")
                self.last_error = f"{type(exc).__name__}: {exc}"
                outcome = "idle"
            if outcome in ("idle", "paused", "budget", "memory", "blocked"):
                self._wake.wait(self.settings.poll_seconds)
                self._wake.clear()

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

    def pending_count(self, namespace: str | None = None) -> int:
        """Signals waiting for rollouts (of one namespace): pending here, and queued entries not yet taken."""
        with self._lock:
            waiting = sum(1 for s in self.pending if namespace in (None, s.namespace))
        if self.feedback_queue is not None:
            waiting += queued_signals(self.feedback_queue, namespace)
        return waiting

    def poll_feedback(self) -> int:
        """Take the queue's new entries into pending signals; returns how many became signals. The
        signals are saved before their entries are marked taken (see the module's docstring); an
        entry that cannot be read is quarantined with its reason."""
        if self.feedback_queue is None:
            return 0
        entries = self.feedback_queue.untaken()
        if not entries:
            return 0
        signals, problems = [], {}
        for entry in entries:
            try:
                signal = signal_of_entry(entry)
            except ValueError as problem:
                log.warning("learning-queue entry %s is quarantined (kept in the queue, never read again): %s",
                            entry.seq, problem)
                problems[entry.seq] = str(problem)
                continue
            if signal is not None:
                signals.append(signal)
        with self._lock:
            for signal in signals:
                self._add_pending(signal)
            self._save_state()
        if problems:
            self.feedback_queue.quarantine(problems, self.owner, self.fence)
            self.quarantined = self._quarantine_note()
        self.feedback_queue.mark_taken([e.seq for e in entries if e.seq not in problems], self.owner, self.fence)
        return len(signals)

    def _quarantine_note(self) -> str:
        if self.feedback_queue is None:
            return ""
        newest = self.feedback_queue.quarantined(limit=QUARANTINE_SHOWN)
        return quarantine_note(self.feedback_queue.quarantined_count(), [e.quarantine for e in newest])

    def _add_pending(self, signal: Signal) -> None:
        """One signal per run: later feedback on a run whose signal waits replaces it (the latest word
        wins), and a signal repeating what the run already taught is dropped."""
        if not _about_a_run(signal):
            self.pending.append(signal)
            return
        key = (signal.namespace, signal.source)
        waiting = next((i for i, s in enumerate(self.pending) if (s.namespace, s.source) == key), None)
        if waiting is not None:
            self.pending[waiting] = signal
        elif self.learned_from.get(_run_key(signal)) != _lesson(signal):
            self.pending.append(signal)

    def work_once(self) -> str:
        """One unit of work: 'paused', 'idle', 'budget' (waiting for the hourly budget), 'memory'
        (waiting for the memory its weights need; the signal stays pending), 'blocked' (the Planner
        could not be loaded; the signal stays pending) or 'processed'."""
        if self.paused or not self.settings.enabled:
            self.activity = "paused" if self.paused else "switched off"
            return "paused"
        self.poll_feedback()
        n = 0 if self.settings.learner == "rft" else self.settings.rollouts_per_signal
        with self._lock:
            if not self.pending:
                self.activity = "idle"
                return "idle"
            if not self.budget.allows(n):
                wait = self.budget.seconds_until(n)
                self.activity = f"waiting {wait / 60:.0f} min for the hourly rollout budget"
                return "budget"
            signal = self.pending[0]
        if self._unloadable is not None:
            version, failed_at = self._unloadable
            if self.versions.current().number == version and time.time() - failed_at < UNLOADABLE_RETRY_S:
                return "blocked"  # the error is recorded; loading it again would fail the same way
            self._unloadable = None
        try:
            self.process(signal)
        except LeaseLost:
            raise
        except PlannerUnavailable as exc:  # the learner's Planner, not the signal: it stays pending
            self._unloadable = (self.versions.current().number, time.time())
            self.last_error = str(exc)
            self.activity = "waiting for a Planner version that loads"
            self._log("signals.jsonl", {"at": time.time(), "question": signal.question, "namespace": signal.namespace,
                                        "kind": signal.kind, "source": signal.source, "waits": True,
                                        "error": f"{exc} (the signal waits)"})
            return "blocked"
        except NotEnoughMemory as exc:  # the machine, not the signal: it waits, and learning tries again
            self.last_error = f"{exc} The signal waits; learning tries again every {self.settings.poll_seconds:.0f} s."
            self.activity = "waiting for the free memory learning needs"
            return "memory"
        except Exception as exc:  # one bad signal must not stop learning; it is logged and dropped
            log.exception("test-time learning failed on %r", signal.question)
            self.last_error = f"{type(exc).__name__}: {exc} (question: {signal.question[:80]!r}; skipped)"
            self._log("signals.jsonl", {"at": time.time(), "question": signal.question, "namespace": signal.namespace,
                                        "kind": signal.kind, "source": signal.source, "error": self.last_error})
        with self._lock:
            if self.pending and self.pending[0] is signal:
                self.pending.pop(0)
            if _about_a_run(signal):
                self.learned_from[_run_key(signal)] = _lesson(signal)
            self._save_state()
        if len(self.batch) >= self.settings.signals_per_update:
            try:
                self.update()
            except LeaseLost:
                raise
            except Exception as exc:  # e.g. a full disk: stop learning rather than retry forever
                log.exception("test-time learning update failed")
                self.last_error = (f"The Planner update failed ({type(exc).__name__}: {exc}); learning is paused. "
                                   "Fix the cause, then resume from the Learning view.")
                self.pause()
        self.activity = "idle"
        return "processed"

    # -- the two sides of learning ----------------------------------------------------------------
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


def _release(model) -> None:
    """Free a Planner version's llama.cpp contexts and adapter once it no longer samples. The base
    Planner (version 0, no adapter) is the app's shared model and stays; so does a model without
    release() (tests' stand-ins)."""
    if getattr(model, "adapter_path", None) is not None and hasattr(model, "release"):
        model.release()
