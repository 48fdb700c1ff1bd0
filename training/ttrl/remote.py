"""The app's handle on a learner in another process (`ttrl.worker = "process"` or "external").

It offers the Learning view and the research page what the in-process TestTimeLearner does (status,
pending counts, recent signals, pause, resume, roll back), read from and written to the learner's
lease row and the learning queue in the database, and the shared learning folder for versions. A
version the worker promotes is loaded by each app process before its next question (`sync`).
"""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from backend.config import LearningConfig
from backend.feedback_queue import FeedbackQueue
from memory_db import LearnerLease
from training.ttrl.learner import LearnerStatus
from training.ttrl.signals import queued_signals
from training.ttrl.versions import Version, VersionStore

log = logging.getLogger(__name__)

USERS_WINDOW_S = 15.0  # how long one notice that a user's question runs holds the learner back
RENEW_S = 5.0  # a running question renews its notice this often


class RemoteLearner:
    def __init__(self, settings: LearningConfig, *, lease: LearnerLease, queue: FeedbackQueue, root: Path,
                 on_promote: Callable[[Version], None] | None = None,
                 process: subprocess.Popen | None = None) -> None:
        self.settings, self.lease, self.queue = settings, lease, queue
        self.root = Path(root)
        self.versions = VersionStore(self.root)
        self.on_promote = on_promote
        self.process = process
        self._lock = threading.Lock()
        self._users_running = 0
        self._noticed_at = 0.0
        self._loaded = 0
        self.sync()  # a restarted app answers with the version that is current

    # -- the worker -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether a worker holds the lease (and, when this app started it, that it is alive)."""
        if self.process is not None and self.process.poll() is not None:
            return False
        return self.lease.read().alive

    def _published(self) -> dict:
        return self.lease.read().status or {}

    def status(self) -> LearnerStatus:
        state = self.lease.read()
        published = (state.status or {}).get("status") or {}
        versions = self.versions.all()
        activity = published.get("activity") or (state.status or {}).get("activity") or "no worker has reported yet"
        if not state.alive:
            activity = ("the worker is not running" + (f" (it exited with code {self.process.returncode})"
                        if self.process is not None and self.process.poll() is not None else ""))
        return LearnerStatus(
            enabled=self.settings.enabled, paused=state.paused, activity=activity,
            pending=int(published.get("pending", 0)), batch=int(published.get("batch", 0)),
            signals_per_update=self.settings.signals_per_update,
            budget_left=int(published.get("budget_left", self.settings.rollouts_per_hour)),
            rollouts_per_hour=self.settings.rollouts_per_hour, current_version=self.versions.current().number,
            versions=versions, last_error=published.get("last_error", ""),
            updates_running=bool(published.get("updates_running", False)),
        )

    def pending_count(self, namespace: str | None = None) -> int:
        by_namespace = self._published().get("pending_by_namespace") or {}
        waiting = sum(int(n) for ns, n in by_namespace.items() if namespace in (None, ns))
        return waiting + queued_signals(self.queue, namespace)

    def read_log(self, name: str) -> list[dict]:
        if name != "signals.jsonl":
            return []
        return list(self._published().get("signals") or [])

    # -- controls ---------------------------------------------------------------------------------
    def pause(self) -> None:
        self.lease.set_paused(True)

    def resume(self) -> None:
        self.lease.set_paused(False)

    def wake(self) -> None:
        """The worker polls the queue every ttrl.poll_seconds; nothing to do here."""

    def rollback(self, number: int) -> Version:
        """Point the shared learning folder at an earlier promoted version and answer with it here; the
        worker trains from it from its next signal (it reloads when the current version changes)."""
        version = self.versions.make_current(number)
        self._swap(version)
        return version

    def sync(self) -> None:
        """Load the version the worker promoted (or another app rolled back to), if it changed."""
        current = self.versions.current()
        if current.number != self._loaded:
            self._swap(current)

    def _swap(self, version: Version) -> None:
        if self.on_promote is not None:
            self.on_promote(version)
        self._loaded = version.number

    # -- giving way to users ----------------------------------------------------------------------
    def _notice(self, seconds: float) -> None:
        try:
            self.lease.users_active_for(seconds)
            self._noticed_at = time.monotonic()
        except Exception:  # answering must not fail because the notice could not be written
            log.exception("could not tell the learner that a question runs")

    def user_run_started(self) -> None:
        with self._lock:
            self._users_running += 1
        self._notice(USERS_WINDOW_S)

    def user_still_running(self) -> None:
        if time.monotonic() - self._noticed_at >= RENEW_S:
            self._notice(USERS_WINDOW_S)

    def user_run_finished(self) -> None:
        with self._lock:
            self._users_running = max(0, self._users_running - 1)
            last = self._users_running == 0
        if last:
            try:
                self.lease.users_done()
            except Exception:
                log.exception("could not tell the learner that the questions ended")

    def stop(self, timeout: float | None = None) -> None:
        """Stop the worker this app started (an external worker is left running)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_worker_process(*, nice: int, config_path: str | None, log_path: Path) -> subprocess.Popen:
    """`python -m training ttrl worker`, nice'd, its output in `log_path`; it reads the same
    configuration (MIA_CONFIG and the environment are inherited)."""
    command = [sys.executable, "-m", "training", "ttrl", "worker", "--nice", str(nice), "--quiet"]
    if config_path:
        command += ["--config", str(config_path)]
    log_path.parent.mkdir(parents=True, exist_ok=True)
    output = open(log_path, "ab")
    try:
        return subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=Path(__file__).resolve().parents[2])
    finally:
        output.close()
