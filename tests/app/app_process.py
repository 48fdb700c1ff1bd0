"""`python -m app` started as a person starts it (its own process, its own session), with what it
prints collected as it comes, and the learner worker it starts found through the learner lease."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

from memory_db import LeaseState, MemoryStore
from tests.app.conftest import REPO, free_port
from tests.waiting import wait_until

START_S = 240  # the app and its worker each load torch, the tiny model, the embedder and the index


def process_exists(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has ended: its parent has not reaped it yet)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False


def worker_pid(state: LeaseState) -> int | None:
    """The pid of the live learner holding the lease (its owner is host:pid:random), or None."""
    if not state.alive:
        return None
    return int(state.owner.split(":")[1])


class AppProcess:
    def __init__(self, config: Path) -> None:
        self.port = free_port()
        self.lines: list[str] = []
        argv = [sys.executable, "-m", "app", "--config", str(config), "--port", str(self.port)]
        self.process = subprocess.Popen(argv, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                        start_new_session=True)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def output(self) -> str:
        return "\n".join(self.lines)

    def wait_for(self, text: str, seconds: float = START_S) -> str:
        """The first line holding `text`; fails with the app's output if the app ends first."""
        def printed():
            found = next((line for line in self.lines if text in line), None)
            assert found is not None or self.process.poll() is None, \
                f"the app ended ({self.process.returncode}) before printing {text!r}:\n{self.output[-4000:]}"
            return found

        return wait_until(printed, seconds, f"the app to print {text!r}", every=0.2)

    def serving(self) -> str:
        """Wait until it serves; the page's URL (its front page answered)."""
        self.wait_for("Serving on http://")
        url = f"http://127.0.0.1:{self.port}/"

        def answers() -> bool:
            try:
                with urllib.request.urlopen(url, timeout=5) as response:
                    return response.status == 200
            except OSError:
                return False

        wait_until(answers, 60, "the app's front page to answer", every=0.5)
        return url

    def stops_with(self, signum: int, seconds: float = 90) -> None:
        """Send `signum` (as a terminal or a service manager does): the app ends, with status 0."""
        self.process.send_signal(signum)
        code = self.process.wait(seconds)
        self._reader.join(10)
        assert code == 0, f"the app ended with {code} on {signal.Signals(signum).name}:\n{self.output[-4000:]}"

    def end(self) -> None:
        """After the test: nothing it started is left running (its worker shares its process group)."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(30)
        self._reader.join(10)


def wait_for_worker(store: MemoryStore, app: AppProcess | None = None, seconds: float = START_S,
                    other_than: int | None = None) -> int:
    """The pid of the learner worker once it holds the lease (one other than `other_than`)."""
    lease = store.learner_lease()

    def holding():
        if app is not None:
            assert app.process.poll() is None, f"the app ended ({app.process.returncode}):\n{app.output[-4000:]}"
        pid = worker_pid(lease.read())
        return pid if pid is not None and pid != other_than else None

    return wait_until(holding, seconds, "a learner worker to hold the lease", every=0.2)
