"""The learning queue and the learner lease in the database (SQLite and PostgreSQL)."""
from __future__ import annotations

import threading
import time

import pytest

from memory_db import LeaseHeld, NewMemory
from memory_db.errors import InvalidMemoryError


def _memory(question="Who wrote Hamlet?", correct=True):
    return NewMemory(question=question, summary="searched, found", plan="1. search", correct=correct,
                     namespace="alice", question_type="human")


def test_entries_are_queued_once_in_order_and_taken_once(open_store):
    store = open_store()
    assert store.enqueue("k1", namespace="alice", kind="feedback", run_id="r1", item={"n": 1})
    assert store.enqueue("k2", namespace="bob", kind="signal", run_id="r2", item={"n": 2})
    assert not store.enqueue("k1", namespace="alice", kind="feedback", run_id="r1", item={"n": 99})  # a repeat
    other = open_store()  # another process on the same database
    assert [(e.key, e.item["n"]) for e in other.queue_entries()] == [("k1", 1), ("k2", 2)]
    assert [e.key for e in other.queue_entries(namespace="bob")] == ["k2"]
    assert [e.key for e in other.queue_entries(kind="feedback", run_id="r1")] == ["k1"]
    first = other.queue_entries(untaken=True)[0]
    assert other.mark_queue_taken([first.seq], owner="worker-1") == 1
    assert other.mark_queue_taken([first.seq], owner="worker-2") == 0  # taken once
    assert [e.key for e in store.queue_entries(untaken=True)] == ["k2"]
    assert store.queue_entries()[0].taken_by == "worker-1"
    assert store.queue_count(untaken=True) == 1 and store.queue_count(namespace="alice") == 1


def test_bad_entries_are_refused_with_a_sentence(open_store):
    store = open_store()
    with pytest.raises(InvalidMemoryError, match="kind is one of feedback, signal"):
        store.enqueue("k", namespace="a", kind="other", run_id="r", item={})
    with pytest.raises(InvalidMemoryError, match="JSON object"):
        store.enqueue("k", namespace="a", kind="signal", run_id="r", item=["x"])
    with pytest.raises(InvalidMemoryError, match="at most 64,000 bytes"):
        store.enqueue("k", namespace="a", kind="signal", run_id="r", item={"x": "y" * 70_000})
    with pytest.raises(InvalidMemoryError, match="1-64 characters"):
        store.enqueue("k" * 65, namespace="a", kind="signal", run_id="r", item={})
    assert store.queue_count() == 0


def test_a_queued_verdict_is_applied_in_the_same_transaction_and_once(open_store):
    store = open_store()
    memory = store.add(_memory(correct=True))
    used = store.add(_memory("Who wrote Macbeth?"))
    verdict = dict(memory_id=memory.id, used_ids=[used.id], correct=False, count_outcome=True,
                   provenance_update={"verified": True}, actor="feedback:alice")
    assert store.enqueue("f1", namespace="alice", kind="feedback", run_id="r1", item={"a": 1}, verdict=verdict)
    assert not store.enqueue("f1", namespace="alice", kind="feedback", run_id="r1", item={"a": 1}, verdict=verdict)
    assert store.get(memory.id, namespace="alice").correct is False
    assert store.get(used.id, namespace="alice").usage_count == used.usage_count + 1  # counted once
    assert store.recorded_verdicts(["f1"], namespace="alice") == {"f1"}
    with pytest.raises(InvalidMemoryError, match="correct must be True or False"):
        store.enqueue("f2", namespace="alice", kind="feedback", run_id="r1", item={}, verdict={**verdict, "correct": "no"})
    assert store.queue_count() == 1


def test_one_learner_holds_the_lease_until_it_stops_or_dies(open_store):
    store = open_store()
    lease = store.learner_lease(ttl_s=3.0)
    assert not lease.read().alive
    assert lease.acquire("w1").owner == "w1"
    other = open_store().learner_lease(ttl_s=3.0)  # a second worker, another process
    with pytest.raises(LeaseHeld, match=r"Another learner \(w1\) holds the lock"):
        other.acquire("w2")
    assert lease.heartbeat("w1", {"status": {"pending": 3}}).status == {"status": {"pending": 3}}
    assert other.read().alive and other.read().status["status"]["pending"] == 3
    time.sleep(3.3)  # w1 missed its heartbeats: it died
    assert not other.read().alive
    assert other.acquire("w2").owner == "w2"
    assert lease.heartbeat("w1") is None  # w1 comes back: it has lost the lease and must stop
    other.release("w2")
    assert store.learner_lease().acquire("w3").owner == "w3"


def test_the_app_pauses_the_learner_and_makes_it_give_way(open_store):
    app = open_store().learner_lease()
    worker = open_store().learner_lease()
    worker.acquire("w1")
    app.set_paused(True)
    assert worker.read().paused
    app.set_paused(False)
    assert not worker.read().paused
    app.users_active_for(30)
    app.users_active_for(1)  # a shorter notice never cuts an earlier one
    assert worker.read().users_active
    app.users_done()
    assert not worker.read().users_active


def test_concurrent_acquirers_get_one_lease(open_store):
    stores = [open_store() for _ in range(4)]
    won, refused = [], []

    def take(i):
        try:
            stores[i].learner_lease().acquire(f"w{i}")
            won.append(i)
        except LeaseHeld:
            refused.append(i)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 3
