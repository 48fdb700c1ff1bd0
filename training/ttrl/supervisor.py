"""The app's watch over the learner worker process it started (`ttrl.worker = "process"`).

When the worker ends without being asked to, the supervisor records how: killed by the kernel's
out-of-memory killer (the kernel's oom_kill counters rose while it ran), killed by SIGKILL without
that evidence ("out of memory?"), or exited with a code and the last line of its log. It starts the
worker again after `backoff_s`, doubling the wait each time, at most `max_restarts` times; then it
stays stopped with the reason shown until learning is resumed from the Learning view.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from training.ttrl.memory_fit import oom_kill_count

log = logging.getLogger(__name__)

RESTART_BACKOFF_S = 60.0
MAX_RESTARTS = 3
LOG_LINE_CHARS = 300
LOG_TAIL_BYTES = 64 * 1024  # where the last line is looked for


@dataclass(frozen=True)
class WorkerExit:
    code: int  # the process's return code; -N: ended by signal N
    at: float  # epoch seconds
    cause: str  # "was killed by the kernel's out-of-memory killer", "exited with code 1 (...)", ...

    @property
    def when(self) -> str:
        return f"{datetime.fromtimestamp(self.at):%H:%M}"


def exit_cause(code: int, *, oom_killed: bool, last_log_line: str) -> str:
    """How a worker ended, as the rest of a sentence that starts with "it"."""
    if code == -signal.SIGKILL:
        return ("was killed by the kernel's out-of-memory killer" if oom_killed
                else "was killed (SIGKILL; out of memory?)")
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        return f"was stopped by {name}"
    said = f" ({last_log_line})" if last_log_line else ""
    return f"exited with code {code}{said}" if code else f"exited{said}"


class WorkerSupervisor:
    """Starts the worker command, waits for it on a thread of its own, restarts it with backoff."""

    def __init__(self, command: list[str], *, log_path: Path, cwd: Path, backoff_s: float = RESTART_BACKOFF_S,
                 max_restarts: int = MAX_RESTARTS, clock: Callable[[], float] = time.time,
                 pause: Callable[[float], bool] | None = None,
                 oom_kills: Callable[[], int] = oom_kill_count, env: dict[str, str] | None = None) -> None:
        """`pause(seconds)` waits before a restart and returns True when the supervisor is being
        stopped meanwhile (default: a wait that `stop` interrupts). `env`: the command's environment
        (default: this process's)."""
        self.command, self.log_path, self.cwd, self.env = list(command), Path(log_path), Path(cwd), env
        self.backoff_s, self.max_restarts = backoff_s, max_restarts
        self.clock, self.oom_kills = clock, oom_kills
        self._stopping = threading.Event()
        self._pause = pause or self._stopping.wait
        self._lock = threading.Lock()
        self._process: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._log_start = 0  # the log's size when the running worker started
        self._kills_before = 0  # the kernel's oom_kill counters then
        self.last_exit: WorkerExit | None = None
        self.restarts = 0  # since the last start or resume
        self.restart_at: float | None = None  # while waiting to restart: when
        self.gave_up = False

    # -- what the app reads -----------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def state_sentence(self) -> str:
        """Why the worker is not running and what happens next ("" while it runs or before it ended)."""
        with self._lock:
            ended, restart_at, gave_up = self.last_exit, self.restart_at, self.gave_up
        if self.alive or ended is None:
            return ""
        how = f"it {ended.cause} at {ended.when}"
        if self._stopping.is_set():
            return f"{how}; it was stopped with the app"
        if gave_up:
            return (f"{how}; after {self.max_restarts} restarts it stays stopped. Fix the cause (its log: "
                    f"{self.log_path}), then press Resume learning to start it again")
        if restart_at is not None:
            return (f"{how}; restarting in {max(0.0, restart_at - self.clock()):.0f} s "
                    f"(restart {self.restarts + 1} of {self.max_restarts})")
        return f"{how}; restarting now"

    # -- control ----------------------------------------------------------------------------------
    def start(self) -> WorkerSupervisor:
        with self._lock:
            self._stopping.clear()
            self.restarts, self.gave_up = 0, False
            self._launch()
        self._thread = threading.Thread(target=self._watch, name="learner-worker-supervisor", daemon=True)
        self._thread.start()
        return self

    def resume(self) -> None:
        """Start a worker the supervisor gave up on (after its restarts were spent); otherwise nothing."""
        if self.gave_up and (self._thread is None or not self._thread.is_alive()):
            self.start()

    def stop(self, timeout: float | None = None) -> None:
        """Terminate the worker (SIGTERM: it releases its lease), kill it after `timeout`; no restart."""
        with self._lock:
            self._stopping.set()
            process = self._process
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        self.join(timeout)

    def join(self, timeout: float | None = None) -> None:
        """Wait until the supervisor's thread ends (stopped, or given up)."""
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the watch --------------------------------------------------------------------------------
    def _launch(self) -> None:
        """Start the command (the caller holds the lock); remembers what the end is compared with."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._kills_before = self.oom_kills()
        with open(self.log_path, "ab") as output:
            self._process = subprocess.Popen(self.command, stdout=output, stderr=subprocess.STDOUT,
                                             stdin=subprocess.DEVNULL, cwd=self.cwd, env=self.env)

    def _watch(self) -> None:
        while True:
            code = self._process.wait()
            if self._stopping.is_set():
                return
            ended = WorkerExit(code, self.clock(), exit_cause(
                code, oom_killed=self.oom_kills() > self._kills_before, last_log_line=self._last_log_line()))
            log.error("The learner worker (pid %s) %s", self._process.pid, ended.cause)
            with self._lock:
                self.last_exit = ended
                if self.restarts >= self.max_restarts:
                    self.gave_up = True
                    return
                delay = self.backoff_s * 2 ** self.restarts
                self.restart_at = self.clock() + delay
            if self._pause(delay):
                return
            with self._lock:
                if self._stopping.is_set():
                    return
                self.restarts += 1
                self.restart_at = None
                self._launch()
            log.warning("Restarted the learner worker (pid %s; restart %d of %d)", self._process.pid,
                        self.restarts, self.max_restarts)

    def _last_log_line(self) -> str:
        """The last line the ended worker wrote to its log (a traceback ends with the error)."""
        if not self.log_path.exists():
            return ""
        with open(self.log_path, "rb") as file:
            file.seek(max(self._log_start, self.log_path.stat().st_size - LOG_TAIL_BYTES))
            lines = [line.strip() for line in file.read().decode("utf-8", errors="replace").splitlines()]
        last = next((line for line in reversed(lines) if line), "")
        return last if len(last) <= LOG_LINE_CHARS else last[: LOG_LINE_CHARS - 1] + "…"
