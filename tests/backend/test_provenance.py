"""A memory's provenance: typed when built, stored as JSON, read back as data that may come from a file."""

from __future__ import annotations

from backend.provenance import LEARNING, RESEARCH, Provenance, read_provenance


def research() -> Provenance:
    return Provenance(origin=RESEARCH, answer="Paris", first_answer="Lyon", verified=True, verdict_source="ground_truth",
                      ground_truth="Paris", memories_used=["m1"], trajectory="search: Eiffel Tower\nAnswer: Paris",
                      run_id="run1", method="mia", models={"planner": "llamacpp:qwen"}, judge_verdict="correct",
                      judge_method="exact", judge_feedback=["matches"], judge_confidence=0.9,
                      sources=["Eiffel Tower"], searched=["Eiffel Tower", "Paris"],
                      decomposition=[{"question": "Where is the tower?", "answer": "Paris"}],
                      extra={"taught_answer": "Paris"})


def test_each_origin_stores_its_own_fields_and_reads_back_the_same():
    stored = research().to_dict()
    assert stored["origin"] == RESEARCH and stored["sources"] == ["Eiffel Tower"] and stored["taught_answer"] == "Paris"
    assert "planner_version" not in stored and "reward" not in stored
    assert read_provenance(stored) == research()

    learned = Provenance(origin=LEARNING, answer="Paris", first_answer="Paris", verified=False, verdict_source="judge",
                         ground_truth=None, memories_used=[], trajectory="t", signal="stream", signal_kind="thumbs",
                         planner_version="v0002", rollouts=4, reward=0.75)
    stored = learned.to_dict()
    assert "sources" not in stored and "run_id" not in stored and stored["planner_version"] == "v0002"
    assert read_provenance(stored) == learned


def test_a_provenance_from_a_file_keeps_only_fields_of_the_right_type():
    hostile = {"origin": ["research"], "answer": 42, "verified": "yes", "sources": ["Paris", {"url": 1}, 7],
               "models": {"planner": 3, "judge": "x"}, "reward": True, "rollouts": "4", "judge_confidence": "high",
               "decomposition": "1. search", "workflow": {"steps": []}}
    read = read_provenance(hostile)
    assert read.origin == RESEARCH and read.answer == "" and read.verified is False
    assert read.sources == ["Paris"] and read.models == {"judge": "x"}
    assert read.reward is None and read.rollouts == 0 and read.judge_confidence is None and read.decomposition is None
    assert read.extra == {"workflow": {"steps": []}}  # a key another writer added is kept as it was
    assert read_provenance("not a dict") == read_provenance({})


def test_a_memory_learning_stored_before_origin_existed_reads_as_learning():
    assert read_provenance({"source": "test-time learning", "planner_version": "v0001"}).origin == LEARNING
