"""The learner as its own process: `python -m training ttrl worker` on the tiny model, a real SQLite
database and the real wiki index; killed and restarted, it loses and repeats no signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from backend.feedback import FeedbackItem, FeedbackQueue
from backend.manager import Manager
from memory_db import MemoryStore
from training.ttrl import TestTimeLearner
from training.ttrl.gate import YieldGate
from training.ttrl.worker import LearnerWorker
from tests.conftest import worker_config_file
from tests.training.conftest import CANARY, REPO
from tests.training.conftest import QUESTIONS as TTRL_QUESTIONS

QUESTIONS = TTRL_QUESTIONS + [("Who was born first, Pablo Trapero or Aleksander Ford?", "Aleksander Ford")]


def _feedback(i: int, question: str, answer: str) -> FeedbackItem:
    return FeedbackItem(run_id=f"run{i}", namespace="alice", user="alice", question=question, answer=answer,
                        thumbs="up", right_answer=None, comment=None, label_before="unsure", label_after="correct",
                        judge_method="your thumbs up", memory_id=None, feedback_id=f"feedback{i}")


def _worker(config: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MIA_CONFIG": str(config)}
    return subprocess.Popen([sys.executable, "-m", "training", "ttrl", "worker", "--quiet", *extra], cwd=REPO,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _signals_used(root: Path) -> int:
    """Signals that reached an update (promoted, rejected or skipped) or wait in the batch."""
    used = 0
    updates = root / "updates.jsonl"
    for line in updates.read_text().splitlines() if updates.exists() else []:
        record = json.loads(line)
        if record["event"] in ("update", "skipped"):
            used += record["signals"]
    batch = root / "batch.jsonl"
    return used + (len([x for x in batch.read_text().splitlines() if x]) if batch.exists() else 0)


@pytest.mark.slow
def test_a_killed_worker_restarts_without_losing_or_repeating_a_signal(tmp_path, tiny_model_dir, index_dir, wiki_tools):
    config = worker_config_file(tmp_path, tiny_model_dir, index_dir)
    data = tmp_path / "data"
    store = MemoryStore(f"sqlite:///{data / 'memory.sqlite'}")
    queue = FeedbackQueue(store)
    for i, (question, answer) in enumerate(QUESTIONS):
        queue.submit(_feedback(i, question, answer))
    root = data / "ttrl"
    try:
        first = _worker(config)
        try:
            deadline = time.monotonic() + 240
            while not (root / "signals.jsonl").exists() and time.monotonic() < deadline:
                assert first.poll() is None, first.stdout.read()
                time.sleep(0.2)
            assert (root / "signals.jsonl").exists(), "the worker processed no signal in 240 s"
            # One learner per deployment: a second worker is refused at once, before loading any model.
            second = _worker(config, "--until-idle")
            out, _ = second.communicate(timeout=60)
            assert second.returncode == 2 and "Another learner" in out and "holds the lock" in out
            first.send_signal(signal.SIGKILL)  # mid-way: a rollout, an update or the canary
            first.wait(30)
        finally:
            if first.poll() is None:
                first.kill()
        assert queue.untaken_count() == 0  # the worker took every entry before it died

        again = _worker(config, "--until-idle")  # the killed worker's lease expires after lease_ttl_s
        out, _ = again.communicate(timeout=300)
        assert again.returncode == 0, out
        assert "stopped after" in out
    finally:
        store.close()
    assert _signals_used(root) == len(QUESTIONS)  # none lost, none scored twice
    sources = [json.loads(line)["source"] for line in (root / "signals.jsonl").read_text().splitlines()]
    assert len(sources) == len(set(sources))
    state = json.loads((root / "state.json").read_text())
    assert state["pending"] == [] and sorted(state["learned_from"]) == [f"alice|feedback:run{i}" for i in range(4)]
    reopened = MemoryStore(f"sqlite:///{data / 'memory.sqlite'}")
    try:
        lease = reopened.learner_lease().read()
        assert lease.owner is None and lease.status["stopped"] is True  # released on the way out
        assert lease.status["status"]["pending"] == 0
    finally:
        reopened.close()


def _learner(tmp_path, model_dir, tools, store, gate=None) -> TestTimeLearner:
    from backend.config import LearningConfig
    from backend.llm.embedded import EmbeddedChatModel

    model = EmbeddedChatModel(model_dir)
    settings = LearningConfig(enabled=True, rollouts_per_signal=2, signals_per_update=5, rollouts_per_hour=100,
                              canary_size=1, max_turns=1, max_new_tokens=16, poll_seconds=0.05, lora_r=4, lora_alpha=8)
    return TestTimeLearner(settings, root=tmp_path / "ttrl", planner_base_dir=model_dir, executor_model=model,
                           judge_model=model, manager=Manager(model, store), tools=tools, canary_path=CANARY,
                           feedback_queue=FeedbackQueue(store), gate=gate, owner="w1")


def test_the_worker_gives_way_while_a_users_question_runs(tmp_path, tiny_model_dir, wiki_tools, embedder):
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        lease = store.learner_lease()
        worker = LearnerWorker(lease, "w1", heartbeat_s=0.2)
        worker.acquire()
        gate = YieldGate(lambda: lease.read().users_active, check_s=0.1, stopped=worker.stopped)
        worker.gate = gate
        learner = _learner(tmp_path, tiny_model_dir, wiki_tools, store, gate)
        FeedbackQueue(store).submit(_feedback(0, *QUESTIONS[0]))
        app = MemoryStore(store.url).learner_lease()  # the app process's handle
        app.users_active_for(120)  # a user's question runs...

        def question_ends():  # ...until 1.5 s after the learner started waiting for it
            while gate.waits == 0:
                time.sleep(0.05)
            time.sleep(1.5)
            app.users_done()

        ending = threading.Thread(target=question_ends, daemon=True)
        ending.start()
        started = time.monotonic()
        done = worker.run(learner, until_idle=True)
        ending.join(5)
        assert done == 1 and gate.waits >= 1 and gate.waited_s >= 1.0
        assert time.monotonic() - started >= 1.5
        published = app.read()
        assert published.status["stopped"] is True and published.status["yields"] >= 1
        assert published.status["status"]["batch"] == 1 and published.owner is None
    finally:
        store.close()


def test_pause_from_the_app_reaches_the_worker(tmp_path, tiny_model_dir, wiki_tools, embedder):
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        lease = store.learner_lease()
        worker = LearnerWorker(lease, "w1", heartbeat_s=0.2)
        worker.acquire()
        learner = _learner(tmp_path, tiny_model_dir, wiki_tools, store)
        FeedbackQueue(store).submit(_feedback(0, *QUESTIONS[0]))
        lease.set_paused(True)
        assert worker.run(learner, until_idle=True) == 0 and learner.paused
        assert store.queue_count(untaken=True) == 1  # nothing was taken while paused
    finally:
        store.close()
