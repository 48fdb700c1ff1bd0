"""Two stores (as two processes would) on one database see each other's writes."""
import pytest

from memory_db import NewMemory


def test_a_second_store_sees_adds_edits_outcomes_and_deletes(open_store):
    writer, reader = open_store(), open_store()
    assert reader.search_contrastive("Who invented the telephone?").successful == []  # index loaded, empty
    memory = writer.add(NewMemory("Who invented the telephone?", "Searched the wiki: Bell.", "p", True))
    assert reader.search_contrastive("Who invented the telephone?").successful[0].memory.id == memory.id
    writer.relabel(memory.id, namespace="default", correct=False)
    writer.record_outcome([memory.id], correct=False)
    failed = reader.search_contrastive("Who invented the telephone?").failed
    assert failed[0].memory.id == memory.id
    assert failed[0].score == pytest.approx(0.7 + 0.3 * 0.5, abs=1e-6)
    reader.delete(memory.id, namespace="default")
    assert writer.search_contrastive("Who invented the telephone?").failed == []


def test_interleaved_writers_keep_both_indexes_complete(open_store):
    first, second = open_store(merge_threshold=None), open_store(merge_threshold=None)
    questions = ["Who painted Guernica?", "What is the longest river in Asia?", "When was the printing press invented?",
                 "Which element has atomic number 8?"]
    for i, question in enumerate(questions):
        (first if i % 2 == 0 else second).add(NewMemory(question, "s", "p", True))
    for store in (first, second):
        found = {s.memory.question for s in store.search_contrastive("anything", k=10).successful}
        assert found == set(questions)
