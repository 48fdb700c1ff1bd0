"""Sources struck as wrong (memory_db/struck.py): per namespace, undoable, recorded in the history of
the memory they concern; a struck memory is not retrieved, in its namespace only."""
from __future__ import annotations

import pytest

from memory_db import InvalidMemoryError, NewMemory, StrikeNotFoundError, memory_key

QUESTION = "When was Arthur's Magazine founded?"


def add(store, namespace: str, question: str = QUESTION, correct: bool = True):
    return store.add(NewMemory(question=question, summary="Search the magazine, read its founding year.",
                               plan="1. search", correct=correct, namespace=namespace,
                               provenance={"verified": True, "verdict_source": "person"}))


def retrieved_ids(store, namespace: str, question: str = QUESTION) -> set[str]:
    found = store.search_contrastive(question, namespace=namespace, k=5)
    return {s.memory.id for s in found.successful + found.failed}


def test_a_struck_passage_is_listed_in_its_namespace_only_and_its_undo_brings_it_back(store):
    memory = add(store, "alice")
    struck = store.strike("wiki:hotpotqa|Arthur's Magazine", namespace="alice", title="Arthur's Magazine",
                          source="wiki:hotpotqa", sentence="Arthur's Magazine (1844-1846) was an American magazine.",
                          memory_id=memory.id, run_id="run-1", actor="alice")
    assert struck.active and struck.kind == "passage" and struck.strike_history_id is not None
    assert store.struck_keys("alice") == {"wiki:hotpotqa|Arthur's Magazine"}
    assert store.struck_keys("bob") == frozenset()
    assert store.strike("wiki:hotpotqa|Arthur's Magazine", namespace="alice", title="Arthur's Magazine") == struck

    entry = store.history(memory.id, namespace="alice")[0]
    assert (entry.action, entry.actor, entry.id) == ("strike", "alice", struck.strike_history_id)
    assert store.undo(entry.id, namespace="alice", actor="alice").id == memory.id  # the memory itself is unchanged
    assert store.struck_keys("alice") == frozenset()
    undone = store.struck("alice", include_undone=True)[0]
    assert not undone.active and store.struck("alice") == []
    unstrike = store.history(memory.id, namespace="alice")[0]
    assert unstrike.action == "unstrike" and unstrike.id == undone.unstrike_history_id

    store.undo(unstrike.id, namespace="alice")  # undoing the undo strikes it again
    assert store.struck_keys("alice") == {"wiki:hotpotqa|Arthur's Magazine"}
    store.unstrike("wiki:hotpotqa|Arthur's Magazine", namespace="alice")
    assert store.struck_keys("alice") == frozenset()
    with pytest.raises(StrikeNotFoundError, match="Memory view"):
        store.unstrike("wiki:hotpotqa|Arthur's Magazine", namespace="bob")


def test_a_strike_from_a_run_without_a_memory_has_no_history_and_still_undoes(store):
    struck = store.strike("doc://papers/a.pdf#page=2|0123456789ab", namespace="alice", title="a.pdf p. 2",
                          source="doc:papers", url="doc://papers/a.pdf#page=2")
    assert struck.strike_history_id is None and struck.memory_id is None
    assert store.history(namespace="alice") == []
    store.unstrike(struck.key, namespace="alice")
    assert store.struck_keys("alice") == frozenset()


def test_a_struck_memory_is_not_retrieved_in_its_namespace_and_another_namespace_still_sees_its_own(store):
    wrong, other = add(store, "alice"), add(store, "alice", "When was First for Women founded?")
    theirs = add(store, "bob")
    assert {wrong.id, other.id} <= retrieved_ids(store, "alice")

    store.strike(memory_key(wrong.id), namespace="alice", kind="memory", title=wrong.question, memory_id=wrong.id)
    assert wrong.id not in retrieved_ids(store, "alice") and other.id in retrieved_ids(store, "alice")
    assert theirs.id in retrieved_ids(store, "bob")
    assert store.get(wrong.id, namespace="alice").id == wrong.id  # still listed for the Memory view
    assert store.history(wrong.id, namespace="alice")[0].action == "strike"
    # paging goes past the struck memory: the second page holds what the first does not
    first = store.search_contrastive(QUESTION, namespace="alice", k=1)
    second = store.search_contrastive(QUESTION, namespace="alice", k=1, offset=1)
    assert [s.memory.id for s in first.successful] == [other.id] and second.successful == []

    store.undo(store.history(wrong.id, namespace="alice")[0].id, namespace="alice")
    assert wrong.id in retrieved_ids(store, "alice")


def test_a_strike_names_what_is_wrong_with_it(store):
    theirs = add(store, "bob")
    with pytest.raises(InvalidMemoryError, match="No memory"):  # another namespace's memory is not alice's to strike
        store.strike(memory_key(theirs.id), namespace="alice", kind="memory", title="x", memory_id=theirs.id)
    with pytest.raises(InvalidMemoryError, match="key"):
        store.strike("", namespace="alice", title="x")
    with pytest.raises(InvalidMemoryError, match="passage"):
        store.strike("k", namespace="alice", kind="page", title="x")
    assert store.struck("alice", include_undone=True) == []


def test_strike_entries_survive_an_export_and_import(store, tmp_path):
    memory = add(store, "alice")
    store.strike("wiki:hotpotqa|A", namespace="alice", title="A", memory_id=memory.id)
    path = tmp_path / "alice.jsonl"
    store.export_jsonl("alice", path)
    outcome = store.import_file("carol", path)
    assert outcome.added == 1
    entry = next(e for e in store.history(namespace="carol") if e.action == "strike")
    assert store.struck_keys("carol") == frozenset()  # an imported entry strikes nothing in carol's namespace
    with pytest.raises(InvalidMemoryError, match="strike the source again"):
        store.undo(entry.id, namespace="carol")
