"""The app's handle on a learner in another process (`ttrl.worker = "process"` or "external").

It offers the Learning view and the research page what the in-process TestTimeLearner does (status,
pending counts, recent signals, pause, resume, roll back), read from and written to the learner's
lease row and the learning queue in the database, and the shared learning folder for versions. A
version the worker promotes is loaded by each app process before its next question (`sync`); one that
cannot be loaded leaves the app answering with the Planner it had, and the status says why. A
worker this app started is watched by a WorkerSupervisor: how it ended is the status's last error,
and it is restarted with backoff; the worker itself stops when this app's process is gone
(training.ttrl.worker.APP_PID_VARIABLE).
"""

from __future__ import annotations

import logging
import os
import socket
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
from training.ttrl.supervisor import WorkerSupervisor
from training.ttrl.version_folder import Version
from training.ttrl.versions import VersionStore
from training.ttrl.worker import APP_PID_VARIABLE

log = logging.getLogger(__name__)

USERS_WINDOW_S = 15.0  # how long one notice that a user's question runs holds the learner back
RENEW_S = 5.0  # a running question renews its notice this often


class RemoteLearner:
    def __init__(self, settings: LearningConfig, *, lease: LearnerLease, queue: FeedbackQueue, root: Path,
                 on_promote: Callable[[Version], None] | None = None,
                 process: WorkerSupervisor | None = None) -> None:
        """`process`: the worker process this app started, under its supervisor (None: an external worker)."""
        self.settings, self.lease, self.queue = settings, lease, queue
        self.root = Path(root)
        self.versions = VersionStore(self.root)
        self.on_promote = on_promote
        self.process = process
        self._lock = threading.Lock()
        self._loading = threading.Lock()  # one sync at a time (a question's and the Learning view's)
        self._users_running = 0
        self._noticed_at = 0.0
        self._loaded = 0  # the current version last tried (loaded, or failed to load)
        self.answering = Version(0, note="base model")  # the version this app process answers with
        self.load_problem = ""  # why it is not the current one
        self.sync()  # a restarted app answers with the version that is current

    # -- the worker -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether a worker holds the lease (and, when this app started it, that it is alive)."""
        if self.process is not None and not self.process.alive:
            return False
        return self.lease.read().alive

    def why_not_running(self) -> str:
        """Why no worker runs, as the rest of a sentence ("it was killed ... at 21:40; restarting in 60 s")."""
        if self.process is None:
            return "no worker holds the learner lease; start one with `python -m training ttrl worker`"
        if self.process.alive:
            return "it is starting (it takes the learner lease before it loads the models)"
        return self.process.state_sentence() or "it has ended; the server log says why"

    def _published(self) -> dict:
        return self.lease.read().status or {}

    def status(self) -> LearnerStatus:
        state = self.lease.read()
        published = (state.status or {}).get("status") or {}
        versions = self.versions.all()
        activity = published.get("activity") or (state.status or {}).get("activity") or "no worker has reported yet"
        running = self.running
        if not running:
            activity = f"the worker is not running: {self.why_not_running()}"
        last_error = published.get("last_error", "")
        exited = self.process.last_exit if self.process is not None else None
        if exited is not None and (not running or not last_error):  # how it ended, unless a newer worker said more
            last_error = f"The learner worker {exited.cause} at {exited.when}."
        return LearnerStatus(
            enabled=self.settings.enabled, paused=state.paused, activity=activity,
            pending=int(published.get("pending", 0)), batch=int(published.get("batch", 0)),
            signals_per_update=self.settings.signals_per_update,
            budget_left=int(published.get("budget_left", self.settings.rollouts_per_hour)),
            rollouts_per_hour=self.settings.rollouts_per_hour, current_version=self.versions.current().number,
            versions=versions, last_error=last_error,
            updates_running=bool(published.get("updates_running", False)),
            quarantined=str(published.get("quarantined", "")), version_notes=self.versions.notes(),
            answering=self.answering.number, load_problem=self.load_problem,
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
        """Resume learning; a worker this app gave up restarting is started again."""
        self.lease.set_paused(False)
        if self.process is not None:
            self.process.resume()

    def wake(self) -> None:
        """The worker polls the queue every ttrl.poll_seconds; nothing to do here."""

    def rollback(self, number: int) -> Version:
        """Point the shared learning folder at an earlier promoted version and answer with it here; the
        worker trains from it from its next signal (it reloads when the current version changes)."""
        version = self.versions.make_current(number)
        self._swap(version)
        return version

    def sync(self) -> None:
        """Load the version the worker promoted (or another app rolled back to), if it changed. One that
        cannot be loaded is not tried again until the current version changes: the app answers with
        the Planner it had, and `load_problem` says why."""
        with self._loading:
            current = self.versions.current()
            if current.number == self._loaded:
                return
            self._loaded = current.number
            try:
                self._swap(current)
            except Exception as exc:
                log.exception("loading Planner %s", current.name)
                self.load_problem = (f"Planner {current.name} could not be loaded in this app ({type(exc).__name__}: "
                                     f"{exc}); {self.answering.name} answers instead. Roll back to a version that "
                                     "loads, or fix the cause and restart the app.")

    def _swap(self, version: Version) -> None:
        if self.on_promote is not None:
            self.on_promote(version)
        self._loaded = version.number
        self.answering, self.load_problem = version, ""

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
        if self.process is not None:
            self.process.stop(timeout)


def start_worker_process(*, nice: int, config_path: str | None, log_path: Path) -> WorkerSupervisor:
    """`python -m training ttrl worker`, nice'd, its output in `log_path`, supervised; it reads the
    same configuration (MIA_CONFIG and the environment are inherited) and stops when this process is gone."""
    command = [sys.executable, "-m", "training", "ttrl", "worker", "--nice", str(nice), "--quiet"]
    if config_path:
        command += ["--config", str(config_path)]
    return WorkerSupervisor(command, log_path=log_path, cwd=Path(__file__).resolve().parents[2],
                            env={**os.environ, APP_PID_VARIABLE: str(os.getpid())}).start()


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True


def other_learner(lease: LearnerLease, *, wait_s: float, poll_s: float = 0.5) -> str:
    """Before an app starts its own worker: "" when the learner lease is free (or becomes free within
    `wait_s`), else the sentence saying which worker holds it and what to do. A worker whose app has
    ended (it publishes its app's pid) stops by itself within its heartbeat: the app waits for it and
    takes over; any other live holder (an external worker, another app's) is left running."""
    deadline = time.monotonic() + wait_s
    while True:
        state = lease.read()
        if not state.alive:
            return ""
        published = state.status or {}
        host, _, rest = (state.owner or "").partition(":")
        app_pid, worker_pid = published.get("app_pid"), published.get("pid") or rest.partition(":")[0]
        app_gone = isinstance(app_pid, int) and host == socket.gethostname() and not _process_exists(app_pid)
        if not app_gone or time.monotonic() >= deadline:
            break
        time.sleep(poll_s)  # the orphaned worker notices its app is gone at its next heartbeat
    if isinstance(app_pid, int):
        started_by = f"started by app process {app_pid}" + (", which has ended" if app_gone else "")
    else:
        started_by = "run on its own"
    return (f"Another learner worker (pid {worker_pid} on {host}, {started_by}) holds the learner lease of this "
            f"deployment, so this app starts none and shows that worker's learning. To have this app run its own, "
            f"stop that worker (`kill {worker_pid}` on {host}) and restart the app; to keep it, set "
            f"ttrl.worker = \"external\".")
