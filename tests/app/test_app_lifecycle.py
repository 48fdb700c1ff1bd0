"""The app and its learner worker as a person or a service manager runs them (`python -m app`, the
tiny model in every role, ttrl.worker = "process"): SIGINT and SIGTERM stop both; a worker whose app
was killed stops by itself and the next app starts its own; an app that finds a worker it did not
start holding the learner lease leaves it running and says what to do."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys

import pytest

from backend.config import load_config
from memory_db import MemoryStore
from tests.app.app_process import START_S, AppProcess, process_exists, wait_for_worker, worker_pid
from tests.app.conftest import REPO, SHARED_INDEX_DIR
from tests.conftest import worker_config_file
from tests.waiting import wait_until


@pytest.fixture
def config_path(tmp_path, tiny_model_dir, shared_tools):  # shared_tools: the index the configuration links to
    return worker_config_file(tmp_path, tiny_model_dir, SHARED_INDEX_DIR)


@pytest.fixture
def database(config_path):
    """The app's database (made here, before any process opens it), for reading the learner lease."""
    store = MemoryStore(load_config(config_path, environ={}).resolved_memory_url)
    yield store
    store.close()


@pytest.mark.timeout(600)  # the app and its worker start (up to START_S each), then stop
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_stops_the_app_and_its_learner_worker(config_path, database, signum):
    app = AppProcess(config_path)
    try:
        app.serving()
        started = int(re.search(r"Started the learner worker \(pid (\d+);", app.output).group(1))
        assert wait_for_worker(database, app) == started
        app.stops_with(signum)
        assert not process_exists(started)
        assert database.learner_lease().read().owner is None  # the worker released the lease on its way out
        assert "Traceback" not in app.output
    finally:
        app.end()


@pytest.mark.timeout(900)  # two apps start one after the other, each with its worker
def test_a_worker_whose_app_was_killed_stops_and_the_next_app_starts_its_own(config_path, database):
    first = AppProcess(config_path)
    second = None
    try:
        first.serving()
        orphan = wait_for_worker(database, first)
        first.process.kill()  # SIGKILL: the app stops nothing on its way out
        first.process.wait(30)
        wait_until(lambda: not process_exists(orphan), 60, "the worker of the killed app to stop")
        assert database.learner_lease().read().owner is None
        worker_log = (config_path.parent / "data" / "ttrl" / "worker.log").read_text()
        assert f"the app (pid {first.pid}) that started this learner worker has ended; stopping" in worker_log

        second = AppProcess(config_path)
        second.serving()
        successor = wait_for_worker(database, second, other_than=orphan)
        assert "Another learner worker" not in second.output
        second.stops_with(signal.SIGTERM)
        assert not process_exists(successor)
    finally:
        first.end()
        if second is not None:
            second.end()


@pytest.mark.timeout(600)
def test_an_app_finding_a_worker_it_did_not_start_leaves_it_running_and_says_what_to_do(config_path, database):
    external = subprocess.Popen([sys.executable, "-m", "training", "ttrl", "worker", "--quiet", "--config", str(config_path)],
                                cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    app = None
    try:
        held = wait_for_worker(database, seconds=START_S)
        assert held == external.pid
        app = AppProcess(config_path)
        said = app.wait_for("holds the learner lease")
        assert (f"Another learner worker (pid {held} on {socket.gethostname()}, run on its own) holds the learner "
                f"lease of this deployment, so this app starts none") in said
        assert f"stop that worker (`kill {held}` on {socket.gethostname()}) and restart the app" in said
        app.serving()
        assert "Started the learner worker" not in app.output
        app.stops_with(signal.SIGTERM)
        assert external.poll() is None and worker_pid(database.learner_lease().read()) == held  # not the app's to stop
        external.send_signal(signal.SIGTERM)
        external.wait(60)
        assert database.learner_lease().read().owner is None
    finally:
        if external.poll() is None:
            external.kill()
            external.wait(30)
        if app is not None:
            app.end()


def test_an_app_waits_for_a_worker_whose_app_has_ended_and_names_one_that_does_not_stop(database):
    from training.ttrl.remote import other_learner

    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait(30)  # an app process that has ended
    lease = database.learner_lease()
    assert other_learner(lease, wait_s=0) == ""  # nobody holds the lease: the app starts its worker
    fence = lease.acquire(f"{socket.gethostname()}:{os.getpid()}:orphan")
    lease.heartbeat(fence, {"pid": os.getpid(), "app_pid": ended.pid})
    said = other_learner(lease, wait_s=0)  # it did not stop within the wait: the app says what to do
    assert (f"Another learner worker (pid {os.getpid()} on {socket.gethostname()}, started by app process {ended.pid}, "
            f"which has ended) holds the learner lease") in said and f"`kill {os.getpid()}`" in said
    lease.release(fence)  # it stopped: the next look finds the lease free
    assert other_learner(lease, wait_s=0) == ""
