"""The app with its learner in another process (ttrl.worker = "process" / "external"): the app only
enqueues and reads what the worker publishes in the database; tiny model, real SQLite, real worker."""

from __future__ import annotations

import queue
import sys
import threading
from dataclasses import replace
from datetime import datetime
from types import SimpleNamespace

import pytest

from app.learning_signals import learning_state_line
from app.learning_tab import load_learning, pause_learning, queue_view, resume_learning
from app.session import AppContext
from app.ui import start_learning
from backend.agent import RunRequest
from backend.config import load_config
from backend.feedback import FeedbackQueue, submit_feedback
from backend.judge import Judge
from tests.app.conftest import make_runtime
from tests.app.test_learning_tab import users
from tests.conftest import worker_config_file
from tests.waiting import wait_until
from training.ttrl import Signal
from training.ttrl.remote import RemoteLearner
from training.ttrl.supervisor import WorkerSupervisor
from training.ttrl.version_folder import PROMOTED, Version
from training.ttrl.versions import VersionStore

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


@pytest.mark.timeout(720)  # its own bounds add up to 510 s: a worker process starting, taking the feedback and learning from it
@pytest.mark.slow
def test_the_app_starts_a_worker_that_learns_from_its_feedback(tmp_path, tiny_model_dir, shared_tools, embedder):
    from tests.conftest import REPO_ROOT

    path = worker_config_file(tmp_path, tiny_model_dir, REPO_ROOT / ".mia" / "test-cache" / "index",
                              worker="process", worker_nice=5)
    runtime = make_runtime(load_config(path), shared_tools, embedder)
    learner = start_learning(runtime, config_path=str(path))
    try:
        assert isinstance(learner, RemoteLearner) and learner.process is not None
        ctx = AppContext(runtime, learner=learner)
        wait_until(lambda: learner.running, 120, "the worker to take the lease")
        events = list(runtime.agent.run(RunRequest(QUESTION)))
        run_id = events[0].run_id
        outcome = submit_feedback(store=runtime.store, runlog=runtime.runlog, judge=Judge(runtime.agent.models["judge"]),
                                  queue=ctx.queue, namespace="default", run_id=run_id, user="tester",
                                  right_answer="Arthur's Magazine")
        assert outcome.queued == 1
        # The worker, another process, takes it from the database and rolls out plans for it.
        wait_until(lambda: ctx.queue.untaken_count() == 0, 60, "the worker to take the feedback")
        records = wait_until(lambda: learner.read_log("signals.jsonl"), 240, "the worker to publish a processed signal")
        assert records[0]["question"] == QUESTION and records[0]["source"] == f"feedback:{run_id}"
        assert "learner has taken everything queued" in queue_view(ctx, None)[0]
        assert "Test-time learning is on" in learning_state_line(ctx)

        # The Learning view's pause reaches the worker through the database.
        pause_learning(ctx, None)
        wait_until(lambda: learner.status().paused and "paused" in learner.status().activity, 60, "the worker to pause")
        resume_learning(ctx, None)
        assert not learner.status().paused

        # A question running in the app makes the worker give way.
        with ctx.question_running() as still_running:
            still_running()
            assert learner.lease.read().users_active
        assert not learner.lease.read().users_active
    finally:
        learner.stop(timeout=30)
        runtime.close()
    assert not learner.process.alive and learner.process.last_exit is None  # stopped, not ended on its own
    assert not learner.running and learner.lease.read().owner is None  # it released the lease on SIGTERM


def test_a_version_promoted_elsewhere_is_loaded_before_the_next_question(tmp_path, embedder):
    import torch
    from safetensors.torch import save_file

    from memory_db import MemoryStore

    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        loaded: list[int] = []
        remote = RemoteLearner(replace(load_config(environ={}).ttrl, enabled=True), lease=store.learner_lease(),
                               queue=FeedbackQueue(store), root=tmp_path / "ttrl",
                               on_promote=lambda version: loaded.append(version.number))
        assert loaded == [] and not remote.running
        assert "not running" in remote.status().activity
        versions = VersionStore(tmp_path / "ttrl")  # the worker's side of the shared folder
        adapter = tmp_path / "a1"
        adapter.mkdir()
        (adapter / "adapter_config.json").write_text("{}")
        save_file({"lora_A": torch.zeros(2)}, adapter / "adapter_model.safetensors")  # whole: it is not set aside
        versions.record(Version(1, status=PROMOTED, parent=0, adapter_dir=str(adapter)))
        versions.make_current(1)
        remote.sync()
        remote.sync()  # once per change
        assert loaded == [1] and remote.status().current_version == 1
        remote.rollback(0)  # from this app: the shared pointer moves, this app answers with the base model
        assert loaded == [1, 0] and versions.current().number == 0
        # Two app processes: a second app's handle notices the first one's rollback.
        other: list[int] = []
        versions.make_current(1)
        RemoteLearner(remote.settings, lease=store.learner_lease(), queue=FeedbackQueue(store),
                      root=tmp_path / "ttrl", on_promote=lambda version: other.append(version.number))
        assert other == [1]  # a starting app answers with the current version
    finally:
        store.close()


# -- a worker that ends on its own: reported with its cause, restarted with backoff ---------------
KILLS_ITSELF = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
NOW = 1_800_000_000.0


class HeldBackoff:
    """The supervisor's wait before a restart, held by the test: each wait is announced with its
    length, and lasts until the test releases it."""

    def __init__(self) -> None:
        self.asked: queue.Queue[float] = queue.Queue()
        self._go = threading.Semaphore(0)

    def __call__(self, seconds: float) -> bool:
        self.asked.put(seconds)
        self._go.acquire()
        return False

    def next(self) -> float:
        return self.asked.get(timeout=60)

    def release(self) -> None:
        self._go.release()


class OomKillCounter:
    """The kernel's oom_kill counters as the supervisor reads them; while `killing`, each read is
    one higher (the kernel's out-of-memory killer acted while the worker ran). A real OOM kill
    cannot be caused safely on a shared machine; the SIGKILL itself is real."""

    def __init__(self) -> None:
        self.count, self.killing = 0, False

    def __call__(self) -> int:
        self.count += self.killing
        return self.count


def supervised(command, tmp_path, **options) -> tuple[WorkerSupervisor, HeldBackoff, OomKillCounter, list[float]]:
    backoff, kills, clock = HeldBackoff(), OomKillCounter(), [NOW]
    supervisor = WorkerSupervisor(command, log_path=tmp_path / "worker.log", cwd=tmp_path, clock=lambda: clock[0],
                                  pause=backoff, oom_kills=kills, **options)
    return supervisor, backoff, kills, clock


def stop_while_waiting(supervisor: WorkerSupervisor, backoff: HeldBackoff) -> None:
    supervisor.stop(timeout=0)
    backoff.release()
    supervisor.join(60)


def test_a_killed_worker_is_reported_and_restarted_with_backoff_until_it_stays_stopped(tmp_path):
    at = f"{datetime.fromtimestamp(NOW):%H:%M}"
    supervisor, backoff, kills, clock = supervised(KILLS_ITSELF, tmp_path, backoff_s=60, max_restarts=3)
    supervisor.start()
    assert backoff.next() == 60  # it died (a real SIGKILL), and the first restart waits 60 s
    assert not supervisor.alive and supervisor.last_exit.code == -9
    assert supervisor.state_sentence() == f"it was killed (SIGKILL; out of memory?) at {at}; restarting in 60 s (restart 1 of 3)"
    clock[0] += 15
    assert supervisor.state_sentence().endswith("restarting in 45 s (restart 1 of 3)")

    kills.killing = True  # from now on the kernel's out-of-memory killer acts while the worker runs
    first_pid = supervisor.pid
    backoff.release()
    assert backoff.next() == 120  # restarted, died again: the wait doubles
    assert supervisor.pid != first_pid
    assert supervisor.last_exit.cause == "was killed by the kernel's out-of-memory killer"
    assert "restart 2 of 3" in supervisor.state_sentence()
    backoff.release()
    assert backoff.next() == 240
    backoff.release()
    supervisor.join(60)  # the fourth death: no restart left, the watch ends
    assert supervisor.gave_up and backoff.asked.empty() and not supervisor.alive
    assert supervisor.state_sentence().startswith(
        f"it was killed by the kernel's out-of-memory killer at {at}; after 3 restarts it stays stopped. Fix the cause")

    supervisor.resume()  # Resume learning starts it again, with its restarts counted afresh
    assert backoff.next() == 60 and not supervisor.gave_up
    stop_while_waiting(supervisor, backoff)
    assert not supervisor.alive and backoff.asked.empty()


def test_an_exit_code_comes_with_the_last_line_the_worker_logged(tmp_path):
    says_why = [sys.executable, "-c", "import sys; print('loading the models'); "
                "print('NotEnoughMemory: Test-time learning needs about 7.5 GB free; 5.1 GB is free.'); sys.exit(1)"]
    (tmp_path / "worker.log").write_text("an earlier worker's last words\n")
    supervisor, backoff, _, _ = supervised(says_why, tmp_path, max_restarts=0)
    supervisor.start().join(60)
    assert supervisor.gave_up and supervisor.last_exit.code == 1
    assert supervisor.last_exit.cause == ("exited with code 1 (NotEnoughMemory: Test-time learning needs about 7.5 GB "
                                          "free; 5.1 GB is free.)")


def test_the_learning_view_says_the_worker_was_killed_and_when_it_restarts(learning_runtime, tmp_path):
    rt = learning_runtime
    at = f"{datetime.fromtimestamp(NOW):%H:%M}"
    supervisor, backoff, kills, _ = supervised(KILLS_ITSELF, tmp_path, backoff_s=60, max_restarts=3)
    kills.killing = True
    remote = RemoteLearner(rt.config.ttrl, lease=rt.store.learner_lease(), queue=FeedbackQueue(rt.store),
                           root=tmp_path / "ttrl", process=supervisor.start())
    ctx = AppContext(rt, learner=remote)
    ctx.queue.add_signal("stream:1", namespace="default", run_id="r1",
                         signal=Signal(QUESTION, "ground_truth", "default", "Arthur's Magazine", "stream:1").to_dict())
    try:
        assert backoff.next() == 60
        status, _, _, _, queue_text, _ = load_learning(ctx, None)
        killed = f"it was killed by the kernel's out-of-memory killer at {at}; restarting in 60 s (restart 1 of 3)"
        assert f"the learner is not running.** 1 signal waits; the learner is not running: {killed}." in status
        assert f"Last error: The learner worker was killed by the kernel's out-of-memory killer at {at}." in status
        assert f"1 signal waits; the learner is not running: {killed}." in queue_text
        assert "taken everything" not in queue_text
        assert "- Memory: training the Planner needs about " in status and " GB is free on this machine now" in status
    finally:
        stop_while_waiting(supervisor, backoff)


def test_the_learning_view_shows_the_queue_rows_a_worker_quarantined(learning_runtime, tmp_path):
    rt = learning_runtime
    lease = rt.store.learner_lease()
    fence = lease.acquire("worker-elsewhere")  # an external worker publishes its learner's status
    note = "1 queue row quarantined: entry 17, 'question' is not text"
    lease.heartbeat(fence, {"status": {"activity": "idle", "pending": 0, "quarantined": note}})
    remote = RemoteLearner(rt.config.ttrl, lease=lease, queue=FeedbackQueue(rt.store), root=tmp_path / "ttrl")
    assert remote.running and remote.status().quarantined == note
    admin = AppContext(rt, users=users(), learner=remote)
    assert f"⚠️ {note} (kept in the queue" in load_learning(admin, SimpleNamespace(username="root"))[0]
    assert "quarantined" not in load_learning(admin, SimpleNamespace(username="alice"))[0]
