"""The learner as its own process: `python -m training ttrl worker` on the tiny model, a real SQLite
database and the real wiki index; killed and restarted, it loses and repeats no signal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from dataclasses import asdict
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from backend.feedback import FeedbackItem, FeedbackQueue
from backend.manager import Manager
from memory_db import LeaseLost, MemoryStore
from training.ttrl import TestTimeLearner, Version
from training.ttrl.gate import YieldGate
from training.ttrl.worker import LearnerWorker, published_status
from tests.conftest import worker_config_file
from tests.training.conftest import CANARY, REPO
from tests.training.conftest import QUESTIONS as TTRL_QUESTIONS
from tests.waiting import wait_until

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


@pytest.mark.timeout(900)  # its own bounds add up to 630 s: 240 s for a signal, 90 s for the kill, 300 s for the restarted worker
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
            def processed_a_signal() -> bool:
                assert first.poll() is None, first.stdout.read()
                return (root / "signals.jsonl").exists()

            wait_until(processed_a_signal, 240, "the worker to process a signal", every=0.2)
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


def _learner(tmp_path, model_dir, tools, store, gate=None, owner="w1") -> TestTimeLearner:
    from backend.config import LearningConfig
    from backend.llm.embedded import EmbeddedChatModel

    model = EmbeddedChatModel(model_dir)
    settings = LearningConfig(enabled=True, rollouts_per_signal=2, signals_per_update=5, rollouts_per_hour=100,
                              canary_size=1, max_turns=1, max_new_tokens=16, poll_seconds=0.05, lora_r=4, lora_alpha=8)
    return TestTimeLearner(settings, root=tmp_path / "ttrl", planner_base_dir=model_dir, executor_model=model,
                           judge_model=model, manager=Manager(model, store), tools=tools, canary_path=CANARY,
                           feedback_queue=FeedbackQueue(store), gate=gate, owner=owner)


def test_the_worker_gives_way_while_a_users_question_runs(tmp_path, tiny_model_dir, wiki_tools, embedder):
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        lease = store.learner_lease()
        worker = LearnerWorker(lease, "w1", heartbeat_s=0.2)
        worker.acquire()
        now = [0.0]  # the gate's clock, moved by the test: until it moves, the gate asks nobody again
        gate = YieldGate(lambda: lease.read().users_active, check_s=0.1, stopped=worker.stopped,
                         clock=lambda: now[0])
        worker.gate = gate
        learner = _learner(tmp_path, tiny_model_dir, wiki_tools, store, gate)
        FeedbackQueue(store).submit(_feedback(0, *QUESTIONS[0]))
        app = MemoryStore(store.url).learner_lease()  # the app process's handle
        app.users_active_for(120)  # a user's question runs...

        def question_ends():  # ...and ends 1.5 s (on the gate's clock) after the learner gave way to it
            try:
                wait_until(lambda: gate.waits, 120, "the learner to give way")
            finally:
                app.users_done()
                now[0] += 1.5

        ending = threading.Thread(target=question_ends, daemon=True)
        ending.start()
        done = worker.run(learner, until_idle=True)
        ending.join(5)
        assert done == 1 and gate.waits == 1 and gate.waited_s == 1.5
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


def test_a_mistyped_queue_row_is_quarantined_and_the_rows_after_it_are_learned(tmp_path, tiny_model_dir, wiki_tools,
                                                                               embedder):
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    try:
        queue = FeedbackQueue(store)
        queue.submit(_feedback(0, *QUESTIONS[0]))
        store.enqueue("bad-signal", namespace="alice", kind="signal", run_id="run-bad",  # entry 2
                      item={"question": 123, "kind": "ground_truth", "answer": "x", "source": "ground_truth:run-bad"})
        queue.submit(FeedbackItem(**{**asdict(_feedback(2, *QUESTIONS[2])), "at": "yesterday"}))  # entry 3
        queue.add_signal("good-signal", namespace="alice", run_id="run3",
                         signal={"question": QUESTIONS[1][0], "kind": "ground_truth", "answer": QUESTIONS[1][1],
                                 "source": "ground_truth:run3"})
        lease = store.learner_lease()
        worker = LearnerWorker(lease, "w1", heartbeat_s=0.2)
        worker.acquire()
        learner = _learner(tmp_path, tiny_model_dir, wiki_tools, store)
        assert learner.pending_count() == 2  # what the Learning view asks: the bad rows count for nothing

        assert worker.run(learner, until_idle=True) == 2  # the good rows before and after the bad ones
        assert queue.untaken_count() == 0
        quarantined = {e.seq: e.quarantine for e in queue.quarantined()}
        assert quarantined == {2: "entry 2, 'question' is not text",
                               3: "entry 3, 'at' is not a time (seconds since 1970, or an ISO 8601 date)"}
        note = ("2 queue rows quarantined: entry 3, 'at' is not a time (seconds since 1970, or an ISO 8601 date); "
                "entry 2, 'question' is not text")
        assert learner.status().quarantined == note
        assert lease.read().status["status"]["quarantined"] == note  # published for the app's Learning view
        sources = [record["source"] for record in learner.read_log("signals.jsonl")]
        assert sources == ["feedback:run0", "ground_truth:run3"]
        # The app's queue listing skips the row it cannot show and says why.
        assert [item.run_id for item in queue.items(skip_damaged=True)] == ["run0"]
        assert any("entry 3, 'at' is not a time" in problem for problem in queue.damage())
        again = _learner(tmp_path, tiny_model_dir, wiki_tools, store, owner="w2")  # a restarted worker
        assert again.status().quarantined == note and again.poll_feedback() == 0
    finally:
        store.close()


T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


def test_a_stalled_worker_is_fenced_out_and_nothing_is_learned_twice(tmp_path, tiny_model_dir, wiki_tools, embedder):
    """Worker A takes the queue, then stalls past its lease (as under SIGSTOP); worker B takes over and
    learns the first signal; A wakes up and tries to go on: every write it tries is refused."""
    store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=embedder)
    other_process = MemoryStore(store.url, embedder=embedder)
    root = tmp_path / "ttrl"
    try:
        queue = FeedbackQueue(store)
        for i in range(2):
            queue.submit(_feedback(i, *QUESTIONS[i]))
        lease_a = store.learner_lease(ttl_s=60, clock=lambda: T0)
        worker_a = LearnerWorker(lease_a, "A")
        worker_a.fence = lease_a.acquire("A")
        learner_a = _learner(tmp_path, tiny_model_dir, wiki_tools, store, owner="A")
        worker_a.learner = learner_a
        assert learner_a.poll_feedback() == 2 and queue.untaken_count() == 0

        # A stalls; its lease expires and B takes over, reading the signals A saved.
        lease_b = other_process.learner_lease(ttl_s=60, clock=lambda: T0 + timedelta(seconds=61))
        worker_b = LearnerWorker(lease_b, "B")
        worker_b.fence = lease_b.acquire("B")
        learner_b = _learner(tmp_path, tiny_model_dir, wiki_tools, store, owner="B")
        worker_b.learner = learner_b
        assert learner_b.work_once() == "processed"
        files = {name: (root / name).read_bytes() for name in ("state.json", "batch.jsonl", "signals.jsonl")}
        memories = store.count(namespace="alice")
        assert memories >= 1 and json.loads(files["state.json"])["pending"][0]["source"] == "feedback:run1"

        # A wakes up mid-signal: its rollouts finish, then its first write is refused and it stops.
        assert worker_a.run(learner_a, until_idle=True) == 0 and worker_a.lost
        assert lease_b.read().owner == "B"  # A did not release B's lease on its way out
        queue.submit(_feedback(2, *QUESTIONS[2]))
        with pytest.raises(LeaseLost):
            learner_a.poll_feedback()  # saving the new entry as pending is refused: it stays queued
        with pytest.raises(LeaseLost):
            queue.mark_taken([queue.untaken()[0].seq], "A", worker_a.fence)
        assert lease_a.heartbeat(worker_a.fence, published_status(learner_a)) is None
        with pytest.raises(LeaseLost):
            learner_a.versions.add(learner_a.versions.staging_dir(), Version(0), make_current=True)
        with pytest.raises(LeaseLost):
            learner_a.rollback(0)

        assert queue.untaken_count() == 1 and lease_b.read().status == {}
        assert {name: (root / name).read_bytes() for name in files} == files  # state, batch and log are B's
        assert store.count(namespace="alice") == memories  # A stored no memory
        assert [v.number for v in learner_b.versions.all()] == [0] and not (root / "current.json").exists()
        assert [json.loads(line)["source"] for line in files["signals.jsonl"].splitlines()] == ["feedback:run0"]
    finally:
        other_process.close()
        store.close()
