"""Namespaces are a hard partition: nothing of A is ever visible or changeable under B."""
import io
import json

import pytest

from memory_db import HistoryNotFoundError, MemoryNotFoundError, NewMemory


@pytest.fixture
def alice_memory(store):
    return store.add(NewMemory("What is Alice's secret project about?", "Alice's private notes.", "p", True,
                               namespace="alice", provenance={"user": "alice"}))


def test_search_list_count_and_namespaces_are_partitioned(store, alice_memory):
    assert store.search_contrastive(alice_memory.question, namespace="bob") .successful == []
    assert store.list(namespace="bob") == [] and store.count(namespace="bob") == 0
    assert store.count(namespace="alice") == 1
    assert store.namespaces() == ["alice"]


def test_another_namespace_cannot_read_or_change_by_id(store, alice_memory):
    memory_id = alice_memory.id
    for attempt in (
        lambda: store.get(memory_id, namespace="bob"),
        lambda: store.edit(memory_id, namespace="bob", summary="hacked"),
        lambda: store.relabel(memory_id, namespace="bob", correct=False),
        lambda: store.pin(memory_id, namespace="bob"),
        lambda: store.delete(memory_id, namespace="bob"),
        lambda: store.record_outcome([memory_id], correct=False, namespace="bob"),
    ):
        with pytest.raises(MemoryNotFoundError):
            attempt()
    assert store.get(memory_id, namespace="alice") == alice_memory
    assert store.history(memory_id, namespace="bob") == []
    with pytest.raises(HistoryNotFoundError):
        store.undo(store.history(memory_id, namespace="alice")[0].id, namespace="bob")


def test_same_question_in_two_namespaces_stays_two_memories(store, alice_memory):
    bob = store.add(NewMemory(alice_memory.question, "Bob's own take.", "p", False, namespace="bob"))
    assert bob.id != alice_memory.id
    assert store.get(alice_memory.id, namespace="alice").summary == "Alice's private notes."
    assert store.search_contrastive(alice_memory.question, namespace="bob").failed[0].memory.id == bob.id
    assert store.search_contrastive(alice_memory.question, namespace="alice").failed == []


def test_export_contains_only_its_namespace(store, alice_memory):
    store.add(NewMemory("Bob's question about trains?", "Bob's notes.", "p", True, namespace="bob"))
    out = io.StringIO()
    assert store.export_jsonl("bob", out) == 1
    assert "Alice" not in out.getvalue() and "alice" not in out.getvalue()
    records = [json.loads(line) for line in out.getvalue().splitlines()]
    assert {r.get("namespace") for r in records} == {"bob"}


def test_importing_alice_export_into_bob_copies_without_touching_alice(store, alice_memory):
    out = io.StringIO()
    store.export_jsonl("alice", out)
    store.import_jsonl("bob", io.StringIO(out.getvalue()))
    copy = store.get(alice_memory.id, namespace="bob")
    store.edit(copy.id, namespace="bob", summary="Bob edits his copy.")
    assert store.get(alice_memory.id, namespace="alice").summary == "Alice's private notes."
