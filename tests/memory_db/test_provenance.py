"""A memory's provenance: typed when built, stored as JSON, read back by each field's declared type as
data that may come from a file, through the real store, its export and its import."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import pytest

from memory_db import MemoryStore, NewMemory
from memory_db.provenance import LEARNING, RESEARCH, Provenance, provenance_update, read_provenance


def research() -> Provenance:
    return Provenance(origin=RESEARCH, answer="Paris", first_answer="Lyon", verified=True, verdict_source="ground_truth",
                      ground_truth="Paris", memories_used=["m1"], trajectory="search: Eiffel Tower\nAnswer: Paris",
                      run_id="run1", method="mia", models={"planner": "llamacpp:qwen"}, judge_verdict="correct",
                      judge_method="exact", judge_feedback=["matches"], judge_confidence=0.9,
                      sources=["Eiffel Tower"], searched=["Eiffel Tower", "Paris"],
                      decomposition=[{"question": "Where is the tower?", "answer": "Paris"}],
                      taught_answer="Paris", taught_by="ana", taught_at=1.5e9, taught_how="typed")


def test_each_origin_stores_its_own_fields_and_reads_back_the_same():
    stored = research().to_dict()
    assert stored["origin"] == RESEARCH and stored["sources"] == ["Eiffel Tower"] and stored["taught_answer"] == "Paris"
    assert "planner_version" not in stored and "reward" not in stored
    assert "workflow" not in stored and "edited_by" not in stored  # written once set
    assert read_provenance(stored) == research()

    learned = Provenance(origin=LEARNING, answer="Paris", first_answer="Paris", verified=False, verdict_source="judge",
                         ground_truth=None, memories_used=[], trajectory="t", signal="stream", signal_kind="thumbs",
                         planner_version="v0002", rollouts=4, reward=0.75)
    stored = learned.to_dict()
    assert "sources" not in stored and "run_id" not in stored and stored["planner_version"] == "v0002"
    assert read_provenance(stored) == learned


def test_a_provenance_from_a_file_keeps_only_fields_of_the_right_type_and_says_why():
    hostile = {"origin": ["research"], "answer": 42, "verified": "yes", "sources": ["Paris", {"url": 1}, 7],
               "models": {"planner": 3, "judge": "x"}, "reward": True, "rollouts": "4", "judge_confidence": "high",
               "decomposition": "1. search", "workflow": {"steps": []}, "newer_field": {"kept": True}}
    read = read_provenance(hostile)
    assert read.origin == RESEARCH and read.answer == "" and read.verified is False
    assert read.sources == ["Paris"] and read.models == {"judge": "x"}
    assert read.reward is None and read.rollouts == 0 and read.judge_confidence is None and read.decomposition is None
    assert read.workflow == {"steps": []}
    assert read.extra == {"newer_field": {"kept": True}}  # a key no field declares is kept as it was
    assert read.left_out == {
        "origin": "a list, not text", "verified": "text, not true or false", "answer": "a whole number, not text",
        "models": "1 of its 2 values of the wrong type", "judge_confidence": "text, not a number",
        "sources": "2 of its 3 items of the wrong type", "rollouts": "text, not a whole number",
        "reward": "true or false, not a number", "decomposition": "text, not a list"}
    assert read_provenance("not a dict") == read_provenance({})


def test_a_memory_learning_stored_before_origin_existed_reads_as_learning():
    assert read_provenance({"source": "test-time learning", "planner_version": "v0001"}).origin == LEARNING


def test_a_long_list_is_cut_when_read_and_says_so():
    read = read_provenance({"searched": [f"page {i}" for i in range(80)]})
    assert len(read.searched) == 50 and read.left_out == {"searched": "only its first 50 of 80 items kept"}


def test_keys_a_newer_version_wrote_survive_a_typed_read_modify_write():
    stored = {**research().to_dict(), "newer_field": [1, 2], "newer_flag": True}
    changed = replace(read_provenance(stored), edited_by="ana").to_dict()
    assert changed == {**stored, "edited_by": "ana"}


def test_fields_are_passed_as_fields_and_merged_updates_are_checked():
    with pytest.raises(ValueError, match="are fields"):
        replace(research(), extra={"workflow": {}})
    assert provenance_update(edited_by="ana", verified=True) == {"edited_by": "ana", "verified": True}
    with pytest.raises(ValueError, match="not a provenance field"):
        provenance_update(edited_by_whom="ana")
    with pytest.raises(ValueError, match="'verified': text, not true or false"):
        provenance_update(verified="yes")


@dataclass(frozen=True)
class WithSearches(Provenance):
    """A provenance with a field a later version declares: the declaration is its only mention."""

    searches: int = 0
    search_queries: list[str] = field(default_factory=list)
    cost: float | None = None


def searched_twice() -> WithSearches:
    return WithSearches(**{**vars(research()), "searches": 2, "search_queries": ["Eiffel Tower", "tower city"],
                           "cost": 0.25})


def test_a_field_declared_on_the_provenance_round_trips_through_the_store_its_export_and_its_import(
        store: MemoryStore, tmp_path, embedder):
    built = searched_twice()
    stored = store.add(NewMemory("Where is the Eiffel Tower?", "Searched wiki: Paris.", "1. search", True,
                                 namespace="team", provenance=built.to_dict()))
    assert read_provenance(store.get(stored.id, namespace="team").provenance, WithSearches) == built

    # Changes the store merges into it (an edit, a relabel, a person's verdict) keep it.
    store.edit(stored.id, namespace="team", plan="1. search the tower", actor="ana")
    store.relabel(stored.id, namespace="team", correct=True, actor="ana")
    store.record_verdict("k1", namespace="team", memory_id=stored.id, used_ids=[], correct=True, count_outcome=False,
                         provenance_update=provenance_update(feedback_label="correct"), actor="feedback:ana")
    after = read_provenance(store.get(stored.id, namespace="team").provenance, WithSearches)
    assert (after.searches, after.search_queries, after.cost) == (2, ["Eiffel Tower", "tower city"], 0.25)
    assert (after.edited_by, after.labelled_by, after.feedback_label, after.verdict_source) == \
        ("ana", "ana", "correct", "person")

    # The version that does not declare it keeps it as an unknown key, and writes it back.
    older = read_provenance(store.get(stored.id, namespace="team").provenance)
    assert older.extra == {"searches": 2, "search_queries": ["Eiffel Tower", "tower city"], "cost": 0.25}
    assert read_provenance(older.to_dict(), WithSearches) == after

    path = tmp_path / "team.jsonl"
    store.export_jsonl("team", path)
    target = MemoryStore(f"sqlite:///{tmp_path / 'other.db'}", embedder=embedder)
    try:
        assert target.import_jsonl("copy", path) == 1
        (copy,) = target.list(namespace="copy")
        assert read_provenance(copy.provenance, WithSearches) == after
    finally:
        target.close()


def test_an_imported_value_of_the_wrong_type_is_left_out_with_its_reason(store: MemoryStore, tmp_path):
    store.add(NewMemory("Where is the Eiffel Tower?", "Searched wiki: Paris.", "1. search", True, namespace="team",
                        provenance=searched_twice().to_dict()))
    path = tmp_path / "team.jsonl"
    store.export_jsonl("team", path, include_history=False)
    lines = path.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        record = json.loads(line)
        if record.get("type") == "memory":
            record["provenance"].update(searches="two", cost=[1], verified="yes", answer=None)
            lines[i] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")

    assert store.import_jsonl("copy", path) == 1
    (copy,) = store.list(namespace="copy")
    read = read_provenance(copy.provenance, WithSearches)
    assert (read.searches, read.cost, read.verified, read.answer) == (0, None, False, "")
    assert read.search_queries == ["Eiffel Tower", "tower city"] and read.run_id == "run1"
    assert read.left_out == {"searches": "text, not a whole number", "cost": "a list, not a number",
                             "verified": "text, not true or false", "answer": "null, not text"}
