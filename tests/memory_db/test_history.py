"""Curation: edit, relabel, pin, delete; every change in the history and reversible."""
import pytest

from memory_db import (
    HistoryNotFoundError,
    InvalidMemoryError,
    MemoryNotFoundError,
    NewMemory,
    UndoConflictError,
)

NS = "alice"


@pytest.fixture
def memory(store):
    return store.add(NewMemory("Who designed the Eiffel Tower?", "Searched the wiki for the tower's engineer.",
                               "1. search Eiffel Tower", True, namespace=NS,
                               provenance={"run_id": "run-7", "sources": ["wiki://Eiffel_Tower"]}),
                     actor="manager")


def test_edit_changes_summary_and_plan_and_records_before_and_after(store, memory):
    edited = store.edit(memory.id, namespace=NS, summary="Look up Gustave Eiffel's company.", plan="1. x",
                        actor="bob")
    assert (edited.summary, edited.plan) == ("Look up Gustave Eiffel's company.", "1. x")
    assert store.get(memory.id, namespace=NS) == edited
    entry = store.history(memory.id, namespace=NS)[0]
    assert (entry.action, entry.actor, entry.memory_id) == ("edit", "bob", memory.id)
    assert entry.before["summary"] == memory.summary and entry.after["summary"] == edited.summary
    assert entry.before["provenance"] == {"run_id": "run-7", "sources": ["wiki://Eiffel_Tower"]}


def test_every_kind_of_change_is_recorded_in_order(store, memory):
    store.edit(memory.id, namespace=NS, plan="new plan")
    store.relabel(memory.id, namespace=NS, correct=False)
    store.pin(memory.id, namespace=NS)
    store.pin(memory.id, namespace=NS, pinned=False)
    store.delete(memory.id, namespace=NS)
    actions = [h.action for h in store.history(memory.id, namespace=NS)]
    assert actions == ["delete", "unpin", "pin", "relabel", "edit", "add"]
    with pytest.raises(MemoryNotFoundError):
        store.get(memory.id, namespace=NS)


def test_relabel_moves_a_memory_between_successes_and_failures(store, memory):
    assert store.search_contrastive("Who built the Eiffel Tower?", namespace=NS).successful
    store.relabel(memory.id, namespace=NS, correct=False)
    result = store.search_contrastive("Who built the Eiffel Tower?", namespace=NS)
    assert not result.successful and result.failed[0].memory.id == memory.id


def test_undo_edit_restores_the_text_but_keeps_later_usage(store, memory):
    store.edit(memory.id, namespace=NS, summary="Changed summary.")
    store.record_outcome([memory.id], correct=False, namespace=NS)
    edit_entry = store.history(memory.id, namespace=NS)[0]
    restored = store.undo(edit_entry.id, namespace=NS, actor="bob")
    assert restored.summary == memory.summary
    assert (restored.usage_count, restored.success_count) == (2, 1)
    assert store.history(memory.id, namespace=NS)[0].action == "undo"


def test_undo_delete_brings_the_memory_back_with_its_id_and_counts(store, memory):
    store.record_outcome([memory.id], correct=True, namespace=NS)
    before = store.get(memory.id, namespace=NS)
    store.delete(memory.id, namespace=NS)
    assert store.search_contrastive("Who designed the Eiffel Tower?", namespace=NS).successful == []
    restored = store.undo(store.history(memory.id, namespace=NS)[0].id, namespace=NS)
    assert restored.id == memory.id
    assert store.get(memory.id, namespace=NS).to_json_dict() | {"updated_at": None} == \
        before.to_json_dict() | {"updated_at": None}
    hit = store.search_contrastive("Who designed the Eiffel Tower?", namespace=NS).successful[0]
    assert hit.memory.id == memory.id and hit.similarity > 0.99


def test_undo_add_removes_the_memory_and_undo_of_that_restores_it(store, memory):
    add_entry = store.history(memory.id, namespace=NS)[-1]
    assert store.undo(add_entry.id, namespace=NS) is None
    assert store.count(namespace=NS) == 0
    store.undo(store.history(memory.id, namespace=NS)[0].id, namespace=NS)
    assert store.get(memory.id, namespace=NS).question == memory.question


def test_undo_relabel_and_pin(store, memory):
    store.relabel(memory.id, namespace=NS, correct=False)
    store.pin(memory.id, namespace=NS)
    entries = store.history(memory.id, namespace=NS)
    store.undo(entries[1].id, namespace=NS)  # the relabel, under the later pin
    now = store.get(memory.id, namespace=NS)
    assert now.correct is True and now.pinned is True
    assert store.search_contrastive("Who designed the Eiffel Tower?", namespace=NS).successful


def test_undo_refuses_when_a_later_change_touched_the_same_field(store, memory):
    store.edit(memory.id, namespace=NS, summary="First change.")
    first = store.history(memory.id, namespace=NS)[0]
    store.edit(memory.id, namespace=NS, summary="Second change.")
    with pytest.raises(UndoConflictError, match="undo the later changes first"):
        store.undo(first.id, namespace=NS)
    assert store.get(memory.id, namespace=NS).summary == "Second change."


def test_undo_of_an_unknown_entry_is_a_clear_error(store, memory):
    with pytest.raises(HistoryNotFoundError, match="No history entry 99999"):
        store.undo(99999, namespace=NS)


def test_edit_validates_input_and_changes_nothing_on_error(store, memory):
    with pytest.raises(InvalidMemoryError, match="at least one"):
        store.edit(memory.id, namespace=NS)
    with pytest.raises(InvalidMemoryError, match="300"):
        store.edit(memory.id, namespace=NS, summary="w " * 301)
    assert store.get(memory.id, namespace=NS) == memory
    assert len(store.history(memory.id, namespace=NS)) == 1


def test_history_of_the_whole_namespace(store, memory):
    other = store.add(NewMemory("What is the speed of light?", "Looked it up.", "p", True, namespace=NS))
    store.pin(other.id, namespace=NS)
    assert [(h.memory_id, h.action) for h in store.history(namespace=NS)] == [
        (other.id, "pin"), (other.id, "add"), (memory.id, "add")]


def test_a_verdict_is_recorded_once_per_key_with_its_outcomes_in_one_transaction(store, memory):
    used = store.add(NewMemory("Who built the Statue of Liberty?", "Searched the statue's article.", "1. search",
                               True, namespace=NS))
    arguments = dict(namespace=NS, memory_id=memory.id, used_ids=[used.id, used.id], correct=False,
                     count_outcome=True, provenance_update={"verified": True}, actor="feedback:bob")
    assert store.record_verdict("k1", **arguments) is True
    assert store.record_verdict("k1", **arguments) is False  # a replay after a crash changes nothing
    relabelled, counted = store.get(memory.id, namespace=NS), store.get(used.id, namespace=NS)
    assert relabelled.correct is False and relabelled.provenance["verified"] is True
    assert relabelled.provenance["run_id"] == "run-7"  # the rest of the provenance is kept
    assert (counted.usage_count, counted.success_count) == (2, 1)
    assert [h.action for h in store.history(memory.id, namespace=NS)] == ["relabel", "add"]
    assert store.recorded_verdicts(["k1", "k2"], namespace=NS) == {"k1"}
    assert store.recorded_verdicts(["k1"], namespace="bob") == set()

    store.delete(memory.id, namespace=NS)  # the run's memory is gone: the used memories still count
    assert store.record_verdict("k2", **arguments | {"correct": True}) is True
    assert store.get(used.id, namespace=NS).usage_count == 3
