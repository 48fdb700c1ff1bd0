"""The learning queue and the learner lease in the database (SQLite and PostgreSQL)."""
from __future__ import annotations

import threading
from datetime import datetime, timedelta, timezone

import pytest

from memory_db import LeaseHeld, LeaseLost, NewMemory, QueueEntry, QueueItemError
from memory_db.errors import InvalidMemoryError
from memory_db.learning_queue import choice_field, read_item, text_field, text_list_field, time_field

T0 = datetime(2025, 1, 1, 12, 0, tzinfo=timezone.utc)


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


def _clock(at: datetime):
    return lambda: at


def test_one_learner_holds_the_lease_until_it_stops_or_dies(open_store):
    store = open_store()
    lease = store.learner_lease(ttl_s=3.0, clock=_clock(T0))
    assert not lease.read().alive
    w1 = lease.acquire("w1")
    assert w1.owner == "w1"
    other = open_store().learner_lease(ttl_s=3.0, clock=_clock(T0 + timedelta(seconds=2)))  # another process
    with pytest.raises(LeaseHeld, match=r"Another learner \(w1\) holds the lock"):
        other.acquire("w2")
    assert lease.heartbeat(w1, {"status": {"pending": 3}}).status == {"status": {"pending": 3}}
    assert other.read().alive and other.read().status["status"]["pending"] == 3
    later = open_store().learner_lease(ttl_s=3.0, clock=_clock(T0 + timedelta(seconds=3.5)))
    assert not later.read().alive  # w1 missed its heartbeats: it died
    w2 = later.acquire("w2")
    assert w2.owner == "w2" and w2.token == w1.token + 1
    assert lease.heartbeat(w1) is None  # w1 comes back: it has lost the lease and must stop
    later.release(w2)
    assert store.learner_lease().acquire("w3").owner == "w3"


def test_a_holder_that_lost_the_lease_is_refused_every_write(open_store):
    """A stalled learner wakes up after another took over: its fence is stale, so marking entries
    taken, quarantining, publishing its status, a file rename under holding() and releasing all fail."""
    store = open_store()
    for key in ("k1", "k2"):
        store.enqueue(key, namespace="alice", kind="signal", run_id=key, item={"n": key})
    first, second = [e.seq for e in store.queue_entries()]
    stale = store.learner_lease(ttl_s=60, clock=_clock(T0)).acquire("w1")
    newer_lease = open_store().learner_lease(ttl_s=60, clock=_clock(T0 + timedelta(seconds=61)))
    newer = newer_lease.acquire("w2")
    newer_lease.heartbeat(newer, {"owner": "w2"})

    with pytest.raises(LeaseLost, match=r"held by w2 \(token 2\), no longer by w1 \(token 1\)"):
        store.mark_queue_taken([first], owner="w1", fence=stale)
    with pytest.raises(LeaseLost):
        store.quarantine_queue_entries({second: "entry 2, 'n' is not text"}, owner="w1", fence=stale)
    assert stale.lease.heartbeat(stale, {"owner": "w1"}) is None
    with pytest.raises(LeaseLost):
        with stale.holding():
            pytest.fail("a stale holder ran its write")
    stale.lease.release(stale)
    state = newer_lease.read()
    assert (state.owner, state.fence_token, state.status) == ("w2", 2, {"owner": "w2"})
    assert store.queue_count(untaken=True) == 2 and store.queue_count(quarantined=True) == 0

    assert store.mark_queue_taken([first], owner="w2", fence=newer) == 1  # the holder's writes go through
    assert store.quarantine_queue_entries({second: "entry 2, 'n' is not text"}, owner="w2", fence=newer) == 1
    assert store.queue_count(untaken=True) == 0


def test_an_unreadable_entry_is_quarantined_kept_and_never_taken_again(open_store):
    store = open_store()
    for key in ("k1", "k2", "k3"):
        store.enqueue(key, namespace="alice", kind="signal", run_id=key, item={"question": key})
    seqs = [e.seq for e in store.queue_entries()]
    assert store.quarantine_queue_entries({seqs[1]: "entry 2, 'question' is not text"}, owner="w1") == 1
    assert [e.key for e in store.queue_entries(untaken=True)] == ["k1", "k3"]  # the rest goes on
    kept = store.queue_entries(quarantined=True)
    assert [(e.key, e.quarantine, e.taken_by) for e in kept] == [("k2", "entry 2, 'question' is not text", "w1")]
    assert store.queue_entries(kind="signal")[1].item == {"question": "k2"}  # kept as it was, for an admin
    assert store.mark_queue_taken([seqs[0]], owner="w1") == 1
    assert store.quarantine_queue_entries({seqs[0]: "too late"}, owner="w1") == 0  # taken rows stay as they are
    assert store.queue_count(quarantined=True) == 1


def _entry(item, seq=17, namespace="alice") -> QueueEntry:
    return QueueEntry(seq, "k", namespace, "signal", "r", item, T0, None, None)


FIELDS = {"question": text_field(20), "thumbs": choice_field(None, "up", "down"), "at": time_field(required=False),
          "used": text_list_field(2, 8, required=False), "namespace": text_field(200, required=False)}


@pytest.mark.parametrize("item, problem", [
    ({"question": 123, "thumbs": None}, "entry 17, 'question' is not text"),
    ({"question": "q" * 21, "thumbs": None}, "entry 17, 'question' is 21 characters, over the 20 allowed"),
    ({"question": "q", "thumbs": "sideways"}, "entry 17, 'thumbs' is not one of None, 'up', 'down'"),
    ({"question": "q", "thumbs": None, "at": "yesterday"}, "entry 17, 'at' is not a time"),
    ({"question": "q", "thumbs": None, "at": True}, "entry 17, 'at' is not a time"),
    ({"question": "q", "thumbs": None, "at": 1e300}, "entry 17, 'at' is not a time"),
    ({"question": "q", "thumbs": None, "used": ["ok", 5]}, "entry 17, 'used' holds something that is not text"),
    ({"question": "q", "thumbs": None, "namespace": "bob"}, "entry 17, 'namespace' is not its row's namespace"),
    ({"thumbs": None}, "entry 17 lacks 'question'"),
    ({"question": "q", "thumbs": None, "rating": 5}, "entry 17 has unknown fields rating"),
])
def test_a_queued_item_is_typed_field_by_field_or_refused_with_the_field_named(item, problem):
    with pytest.raises(QueueItemError) as refused:
        read_item(_entry(item), FIELDS)
    assert str(refused.value).startswith(problem)


def test_a_typed_item_gets_its_rows_namespace_and_a_parsed_time():
    typed = read_item(_entry({"question": "q", "thumbs": "up", "at": "2025-01-02T03:04:05"}), FIELDS)
    assert typed == {"question": "q", "thumbs": "up", "at": datetime(2025, 1, 2, 3, 4, 5, tzinfo=timezone.utc).timestamp(),
                     "namespace": "alice"}
    assert read_item(_entry({"question": "q", "thumbs": None, "at": 1700000000}), FIELDS)["at"] == 1700000000.0


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


def test_an_upgrade_keeps_queued_entries_and_the_lease_and_starts_the_fence_at_zero(database_url, embedder):
    from sqlalchemy import insert

    from memory_db import MemoryStore
    from memory_db.database import migrate, open_engine
    from memory_db.schema import learner_leases, learning_queue

    engine = open_engine(database_url)
    migrate(engine, "0006_learning_queue")
    with engine.begin() as conn:  # the columns of 0006 only: quarantine and fence_token come with the upgrade
        conn.execute(insert(learning_queue).values(key="k1", namespace="alice", kind="signal", run_id="r1",
                                                   item='{"question": "Who?"}', created_at=T0.replace(tzinfo=None)))
        conn.execute(insert(learner_leases).values(name="ttrl", owner=None, paused=True))
    engine.dispose()
    store = MemoryStore(database_url, embedder=embedder)
    try:
        [entry] = store.queue_entries(untaken=True)
        assert (entry.key, entry.item, entry.quarantine) == ("k1", {"question": "Who?"}, None)
        lease = store.learner_lease()
        assert lease.read().paused and lease.read().fence_token == 0
        assert lease.acquire("w1").token == 1
    finally:
        store.close()
