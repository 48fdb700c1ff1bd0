"""Capacity with eviction of the lowest-value memories; near-duplicates merged."""
import pytest

from memory_db import CapacityError, NewMemory

QUESTIONS = ["Who discovered gravity?", "What is the capital of Peru?", "When did World War I start?",
             "How many legs does a spider have?", "Which planet is the largest?", "Who wrote Don Quixote?"]


def add(store, question, correct=True, namespace="default", summary="Searched and verified."):
    return store.add(NewMemory(question, summary, "plan", correct, namespace=namespace))


def test_capacity_evicts_lowest_win_rate_then_usage_then_age(open_store):
    store = open_store(capacity=3)
    a, b, c = (add(store, q) for q in QUESTIONS[:3])
    store.record_outcome([a.id], correct=False)  # a: 1/2
    store.record_outcome([b.id], correct=True)  # b: 2/2
    add(store, QUESTIONS[3])  # over capacity: a has the lowest win rate
    assert {m.question for m in store.list(namespace="default")} == {QUESTIONS[i] for i in (1, 2, 3)}
    evicted = store.history(a.id, namespace="default")[0]
    assert evicted.action == "evict" and evicted.before["question"] == QUESTIONS[0]
    add(store, QUESTIONS[4])  # b (2/2), c (1/1) and d (1/1): lowest usage then oldest -> c
    assert {m.question for m in store.list(namespace="default")} == {QUESTIONS[i] for i in (1, 3, 4)}
    assert store.search_contrastive(QUESTIONS[2], k=5).successful[0].memory.question != QUESTIONS[2]


def test_pinned_memories_are_never_evicted(open_store):
    store = open_store(capacity=2)
    first = add(store, QUESTIONS[0])
    store.record_outcome([first.id], correct=False)
    store.pin(first.id, namespace="default")
    add(store, QUESTIONS[1])
    add(store, QUESTIONS[2])
    assert first.id in {m.id for m in store.list(namespace="default")}
    assert store.count(namespace="default") == 2


def test_full_of_pinned_memories_refuses_with_advice(open_store):
    store = open_store(capacity=1)
    store.pin(add(store, QUESTIONS[0]).id, namespace="default")
    with pytest.raises(CapacityError, match="unpin or delete"):
        add(store, QUESTIONS[1])
    assert [m.question for m in store.list(namespace="default")] == [QUESTIONS[0]]


def test_capacity_is_per_namespace(open_store):
    store = open_store(capacity=2, namespace_capacity={"big": 10})
    for question in QUESTIONS[:4]:
        add(store, question, namespace="small")
        add(store, question, namespace="big")
    assert store.count(namespace="small") == 2 and store.count(namespace="big") == 4


def test_undo_of_an_eviction_restores_the_memory_within_capacity(open_store):
    store = open_store(capacity=1)
    first = add(store, QUESTIONS[0])
    second = add(store, QUESTIONS[1])
    restored = store.undo(store.history(first.id, namespace="default")[0].id, namespace="default")
    assert restored.id == first.id
    assert [m.id for m in store.list(namespace="default")] == [first.id]  # the other one made room
    assert store.history(second.id, namespace="default")[0].action == "evict"
    store.pin(first.id, namespace="default")
    with pytest.raises(CapacityError):  # restoring `second` would overflow a pinned-only namespace
        store.undo(store.history(second.id, namespace="default")[0].id, namespace="default")
    assert [m.id for m in store.list(namespace="default")] == [first.id]


def test_near_duplicates_merge_counts_and_keep_the_better_memory(open_store):
    store = open_store(merge_threshold=0.9)
    weak = add(store, "Who is the author of the novel Frankenstein?", correct=False, summary="Guessed Byron.")
    merged = add(store, "Who wrote the novel Frankenstein?", correct=True, summary="Searched: Mary Shelley.")
    assert merged.id == weak.id and store.count(namespace="default") == 1
    assert (merged.correct, merged.summary) == (True, "Searched: Mary Shelley.")
    assert (merged.usage_count, merged.success_count) == (2, 2)
    entry = store.history(weak.id, namespace="default")[0]
    assert entry.action == "merge" and entry.before["summary"] == "Guessed Byron."
    # the better stored memory wins over a new, worse one; it counts the new one's failure
    kept = add(store, "Who was the writer of the novel Frankenstein?", correct=False, summary="Guessed.")
    assert (kept.summary, kept.usage_count, kept.success_count) == ("Searched: Mary Shelley.", 3, 2)
    # undo the merge: the earlier state returns
    restored = store.undo(store.history(weak.id, namespace="default")[1].id, namespace="default")
    assert (restored.summary, restored.correct, restored.question) == (
        "Guessed Byron.", False, "Who is the author of the novel Frankenstein?")
    assert (restored.usage_count, restored.success_count) == (2, 1)  # the later failure stays counted
    assert store.search_contrastive("Who is the author of Frankenstein?").failed[0].memory.id == weak.id


def test_merging_can_be_switched_off(open_store):
    store = open_store(merge_threshold=None)
    add(store, "Who is the author of the novel Frankenstein?")
    add(store, "Who wrote the novel Frankenstein?")
    assert store.count(namespace="default") == 2


def test_keep_contrast_keeps_a_success_and_a_failure_for_one_question(store):
    from memory_db import NewMemory

    question = "Which city hosted the 1900 Summer Olympics?"
    success = store.add(NewMemory(question=question, summary="Searched the Games, read the host.", plan="1. Search.",
                                  correct=True), keep_contrast=True)
    failure = store.add(NewMemory(question=question, summary="Guessed from memory.", plan="1. Guess.",
                                  correct=False), keep_contrast=True)
    assert failure.id != success.id and store.count(namespace="default") == 2
    # a repeat with the same label still follows the same-question rule (a worse failure replaces the failure)
    again = store.add(NewMemory(question=question, summary="Guessed again.", plan="1. Guess.", correct=False),
                      keep_contrast=True)
    assert again.id == failure.id and store.count(namespace="default") == 2
    # without keep_contrast the failure is dropped beside the stored success, as before
    dropped = store.add(NewMemory(question=question, summary="Another guess.", plan="1. Guess.", correct=False))
    assert store.count(namespace="default") == 2 and dropped.id in (success.id, failure.id)
