"""The app with its learner in another process (ttrl.worker = "process" / "external"): the app only
enqueues and reads what the worker publishes in the database; tiny model, real SQLite, real worker."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from app.learning_tab import pause_learning, queue_view, resume_learning
from app.research_tab import learning_state_line
from app.session import AppContext
from app.ui import start_learning
from backend.agent import RunRequest
from backend.config import load_config
from backend.feedback import FeedbackQueue, submit_feedback
from backend.judge import Judge
from tests.app.conftest import make_runtime
from tests.conftest import worker_config_file
from training.ttrl.remote import RemoteLearner
from training.ttrl.versions import PROMOTED, Version, VersionStore

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def _wait(condition, seconds: float, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"{what} within {seconds:.0f} s")


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
        _wait(lambda: learner.running, 120, "the worker took the lease")
        events = list(runtime.agent.run(RunRequest(QUESTION)))
        run_id = events[0].run_id
        outcome = submit_feedback(store=runtime.store, runlog=runtime.runlog, judge=Judge(runtime.agent.models["judge"]),
                                  queue=ctx.queue, namespace="default", run_id=run_id, user="tester",
                                  right_answer="Arthur's Magazine")
        assert outcome.queued == 1
        # The worker, another process, takes it from the database and rolls out plans for it.
        _wait(lambda: ctx.queue.untaken_count() == 0, 60, "the worker took the feedback")
        records = _wait(lambda: learner.read_log("signals.jsonl"), 240, "the worker published a processed signal")
        assert records[0]["question"] == QUESTION and records[0]["source"] == f"feedback:{run_id}"
        assert "learner has taken everything queued" in queue_view(ctx, None)[0]
        assert "Test-time learning is on" in learning_state_line(ctx)

        # The Learning view's pause reaches the worker through the database.
        pause_learning(ctx, None)
        _wait(lambda: learner.status().paused and "paused" in learner.status().activity, 60, "the worker paused")
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
    assert learner.process.returncode is not None
    assert not learner.running and learner.lease.read().owner is None  # it released the lease on SIGTERM


def test_a_version_promoted_elsewhere_is_loaded_before_the_next_question(tmp_path, embedder):
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
        versions.record(Version(1, status=PROMOTED, parent=0, adapter_dir=str(tmp_path / "a1")))
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
