"""MemoryStore.add_many: several memories with one embedding call and one commit per namespace."""
from __future__ import annotations

import pytest

from memory_db import InvalidMemoryError, NewMemory
from memory_db.versions import read_version


def _new(question, namespace="alice", correct=True):
    return NewMemory(question=question, summary=f"Searched for {question}", plan="1. search", correct=correct,
                     namespace=namespace, question_type="human")


class CountingEmbedder:
    def __init__(self, inner):
        self.inner, self.calls = inner, 0
        self.dim = getattr(inner, "dim", 384)

    def encode(self, texts):
        self.calls += 1
        return self.inner.encode(texts)

    def __getattr__(self, name):
        return getattr(self.inner, name)


def test_a_batch_is_stored_as_single_adds_would_store_it(open_store, embedder):
    counting = CountingEmbedder(embedder)
    store = open_store()
    store._embedder = counting
    batch = [_new("Who wrote Hamlet?"), _new("Where is Great Exuma?", "bob"), _new("Who wrote Hamlet?"),
             _new("What is the capital of Peru?")]
    before = {ns: _version(store, ns) for ns in ("alice", "bob")}
    stored = store.add_many(batch)
    assert counting.calls == 1  # one embedding call for the whole batch
    assert [m.question for m in stored] == [n.question for n in batch]
    assert stored[2].id == stored[0].id  # the repeat inside the batch found its first copy
    assert store.count(namespace="alice") == 2 and store.count(namespace="bob") == 1
    assert {ns: _version(store, ns) - before[ns] for ns in ("alice", "bob")} == {"alice": 1, "bob": 1}  # a commit each
    found = open_store().search_contrastive("Who wrote Hamlet?", namespace="alice", k=1)  # another process sees it
    assert found.successful[0].memory.id == stored[0].id
    assert [h.action for h in store.history(stored[0].id, namespace="alice")] == ["add"]


def test_a_bad_memory_in_a_batch_writes_nothing(open_store):
    store = open_store()
    with pytest.raises(InvalidMemoryError):
        store.add_many([_new("Who wrote Hamlet?"), _new("")])
    assert store.count(namespace="alice") == 0
    assert store.add_many([]) == []


def _version(store, namespace):
    with store._engine.connect() as conn:
        return read_version(conn, namespace) or 0


def test_a_batch_memory_repeating_a_stored_one_is_merged_into_it(open_store):
    store = open_store()
    stored = store.add_many([_new(f"Which year did event {i} happen?") for i in range(20)])  # enough for index scans
    again = store.add_many([_new("Which city hosted event 900?"), _new("Which year did event 7 happen?"),
                            _new("Which river crosses town 3?")])
    assert again[1].id == stored[7].id  # found among the stored memories, in the same statement as the others
    assert again[0].id not in {m.id for m in stored} and store.count(namespace="alice") == 22


@pytest.mark.postgres
def test_nearest_many_finds_what_nearest_finds(postgres_url, embedder):
    """Only PostgreSQL with pgvector looks for near-duplicates in SQL."""
    from memory_db import MemoryStore

    store = MemoryStore(postgres_url, embedder=embedder)
    assert store._database_search is not None
    store.add_many([_new(f"Which year did event {i} happen?") for i in range(30)])
    queries = embedder.encode([f"In which year did event {i} take place?" for i in (3, 17, 29)] + ["Who wrote Hamlet?"])
    with store._engine.begin() as conn:
        many = store._database_search.nearest_many(conn, "alice", list(queries))
        one = [store._database_search.nearest(conn, "alice", "text", q, None) for q in queries]
    assert [m[0] for m in many] == [o[0] for o in one]
    assert all(abs(m[1] - o[1]) < 1e-5 for m, o in zip(many, one))
    store.close()
