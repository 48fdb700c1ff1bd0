"""Test-time learning as its own process: `python -m training ttrl worker`.

The worker holds the deployment's learner lease (one learner per database), builds the app's models,
tools and memory from the same configuration, takes the learning queue from the database, trains,
runs the canary and promotes versions into the shared learning folder (`<data_dir>/ttrl`); the app
processes only enqueue, read what the worker publishes in its lease row, and pick up a promoted
version between questions. Every model call waits while a user's question runs (training.ttrl.gate),
and the app starts it `nice`d, so on one small machine answering comes first.

Killed at any point, a restarted worker goes on where it stopped: queued entries are taken only
after they are saved as pending signals, a scored signal is in the batch file before it leaves the
pending list, and a signal found in both is not scored again.

A worker that stalls past its lease (a paused process) and wakes up after another took over is
fenced out: its learner carries the lease's fence, every write it makes checks it, and the first
refused write (LeaseLost) stops the worker without writing anything (see training.ttrl.learner).

SIGTERM and SIGINT stop it the same way: it releases its lease on the way out. A worker an app started
(the app's pid in APP_PID_VARIABLE) also stops when that app's process is gone: its heartbeat notices
that its parent changed (the app ended without stopping it: killed, or crashed) and stops it as
SIGTERM would, so no worker outlives its app holding the lease.
"""

from __future__ import annotations

import _thread
import logging
import os
import signal
import threading
import time
from collections import Counter
from dataclasses import asdict, replace

from backend.config import Config
from memory_db import LearnerLease, LeaseFence, LeaseHeld, LeaseLost, MemoryStore
from training.ttrl.gate import YieldGate
from training.ttrl.learner import TestTimeLearner, learner_owner, owner_is_gone

log = logging.getLogger(__name__)

RECENT_SIGNALS = 100  # signal records the worker publishes for the Learning view
APP_PID_VARIABLE = "MIA_LEARNER_APP_PID"  # set by the app that starts a worker: the worker stops when it is gone


def app_pid_from_environment() -> int | None:
    value = os.environ.get(APP_PID_VARIABLE, "")
    return int(value) if value.isdigit() else None


def published_status(learner: TestTimeLearner, gate: YieldGate | None = None) -> dict:
    """What the app's Learning view reads of a learner in another process."""
    status = learner.status()
    with learner._lock:
        by_namespace = Counter(s.namespace for s in learner.pending)
    return {
        "status": asdict(status),
        "pending_by_namespace": dict(by_namespace),
        "signals": learner.read_log("signals.jsonl")[-RECENT_SIGNALS:],
        "owner": learner.owner,
        "pid": os.getpid(),
        "yielded_s": round(gate.waited_s, 1) if gate is not None else 0.0,
        "yields": gate.waits if gate is not None else 0,
        "at": time.time(),
    }


class LearnerWorker:
    """Runs a learner under the lease: a heartbeat thread renews it and publishes the status; the
    main loop mirrors the app's pause switch and works while there is work. The learner it runs
    writes under the fence the acquire gave."""

    def __init__(self, lease: LearnerLease, owner: str, *, heartbeat_s: float = 5.0,
                 stopped: threading.Event | None = None, app_pid: int | None = None) -> None:
        """`app_pid`: the app process that started this worker (its parent); when it is gone the worker
        stops as on SIGTERM (None: a worker run on its own)."""
        self.lease, self.owner, self.heartbeat_s, self.app_pid = lease, owner, heartbeat_s, app_pid
        self.stopped = stopped or threading.Event()
        self.fence: LeaseFence | None = None
        self._learner: TestTimeLearner | None = None
        self.gate: YieldGate | None = None
        self.lost = False
        self._beat: threading.Thread | None = None

    @property
    def learner(self) -> TestTimeLearner | None:
        return self._learner

    @learner.setter
    def learner(self, learner: TestTimeLearner) -> None:
        """The learner this worker runs: it writes under this worker's fence from now on."""
        learner.fence = self.fence
        self._learner = learner

    def acquire(self) -> None:
        """Take the lease (LeaseHeld when another live learner has it) and start the heartbeat."""
        self.fence = self.lease.acquire(self.owner, holder_is_gone=owner_is_gone)
        self._beat = threading.Thread(target=self._heartbeat, name="learner-heartbeat", daemon=True)
        self._beat.start()

    def _lose(self, why: str) -> None:
        log.error("the learner lease was taken by another worker (%s); stopping without writing", why)
        self.lost = True
        self.stopped.set()

    def _payload(self) -> dict:
        if self.learner is None:
            return {"status": None, "owner": self.owner, "pid": os.getpid(), "app_pid": self.app_pid,
                    "activity": "loading the models", "at": time.time()}
        return {**published_status(self.learner, self.gate), "app_pid": self.app_pid}

    def app_gone(self) -> bool:
        """Whether the app that started this worker has ended (the worker was handed to another parent)."""
        return self.app_pid is not None and os.getppid() != self.app_pid

    def _heartbeat(self) -> None:
        while not self.stopped.is_set():
            if self.app_gone():
                log.error("the app (pid %s) that started this learner worker has ended; stopping", self.app_pid)
                self.stopped.set()
                _thread.interrupt_main(signal.SIGTERM)  # what run_worker's SIGTERM handler does, mid-work included
                return
            try:
                if self.lease.heartbeat(self.fence, self._payload()) is None:
                    self._lose("this one missed its heartbeats")
                    return
            except Exception:  # the database is briefly unreachable: keep trying; the lease may expire
                log.exception("learner heartbeat")
            self.stopped.wait(self.heartbeat_s)

    def run(self, learner: TestTimeLearner, *, until_idle: bool = False, max_signals: int | None = None) -> int:
        """Work until stopped (or, with `until_idle`, until nothing is left); returns signals processed."""
        self.learner = learner
        done = 0
        try:
            while not self.stopped.is_set():
                try:
                    paused = self.lease.read().paused
                    if paused != learner.paused:
                        learner.pause() if paused else learner.resume()
                    outcome = learner.work_once()
                except LeaseLost as lost:
                    self._lose(str(lost))
                    break
                if outcome == "processed":
                    done += 1
                    if max_signals is not None and done >= max_signals:
                        break
                    continue
                if until_idle:
                    break
                self.stopped.wait(learner.settings.poll_seconds)
        finally:
            self.close()
        return done

    def close(self) -> None:
        self.stopped.set()
        if self._beat is not None:
            self._beat.join(timeout=self.heartbeat_s + 5)
        if self.fence is not None and not self.lost:
            try:
                if self.learner is not None:
                    self.lease.heartbeat(self.fence, {**self._payload(), "stopped": True})
                self.lease.release(self.fence)
            except Exception:
                log.exception("releasing the learner lease")


def _search_without_building_vectors(config: Config) -> Config:
    """The app builds the corpus's dense vectors (once, in the background); until they are cached the
    worker's rollouts search with BM25 instead of building a second copy beside it."""
    from backend.tools.wiki_index import dense_vectors_cached
    from memory_db import get_embedder

    if config.search.hybrid and not dense_vectors_cached(config.index_cache_dir, get_embedder()):
        print("The dense vectors of the corpus are not built yet: the worker's rollouts search with BM25 "
              "(restart the worker once the app has built them).", flush=True)
        return replace(config, search=replace(config.search, hybrid=False))
    return config


def run_worker(config: Config, *, until_idle: bool = False, max_signals: int | None = None, nice: int = 0,
               progress: bool = True) -> int:
    """The worker's whole life: lease, models, learning, release. Returns signals processed."""
    from backend.runtime import build_runtime
    from training.ttrl.live import build_learner

    if nice:
        os.nice(nice)
    config = replace(config, ttrl=replace(config.ttrl, enabled=True))
    stopped = threading.Event()
    app_pid = app_pid_from_environment()
    if app_pid is not None and os.getppid() != app_pid:
        print(f"The app (pid {app_pid}) that started this learner worker has ended; not starting.", flush=True)
        return 0

    def on_term(signum, _frame):
        stopped.set()
        raise SystemExit(128 + signum)  # the lease is released on the way out; the state is already on disk

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)  # Ctrl-C in the app's terminal reaches its worker too
    lease_store = MemoryStore(config.resolved_memory_url)  # the lease first: a second worker stops before loading models
    runtime = None
    try:
        lease = lease_store.learner_lease(ttl_s=config.ttrl.lease_ttl_s)
        worker = LearnerWorker(lease, learner_owner(), heartbeat_s=min(5.0, config.ttrl.lease_ttl_s / 4), stopped=stopped,
                               app_pid=app_pid)
        worker.acquire()
        try:
            config = _search_without_building_vectors(config)
            runtime = build_runtime(config, progress=progress, with_documents=False)
            worker.gate = YieldGate(lambda: lease.read().users_active, stopped=stopped)
            learner = build_learner(runtime, serving=False, gate=worker.gate, owner=worker.owner)
        except BaseException:
            worker.close()
            raise
        print(f"Test-time learning worker {worker.owner}: Planner v{learner.versions.current().number:04d}, "
              f"{learner.pending_count()} signals waiting; folder {learner.root}", flush=True)
        return worker.run(learner, until_idle=until_idle, max_signals=max_signals)
    finally:
        if runtime is not None:
            runtime.close()
        lease_store.close()


__all__ = ["APP_PID_VARIABLE", "LeaseHeld", "LearnerWorker", "published_status", "run_worker"]
