"""RL datasets from HotpotQA JSONL and from the app's run log + feedback, as parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.events import AnswerReady, MemoriesRetrieved, PlanReady, RunFailed, RunStarted, VerdictReady
from backend.llm.embedded import EmbeddedChatModel
from backend.planner import Planner
from backend.question import Question
from backend.runlog import RunLog
from backend.tools.base import tool_prompt_lines
from training.datasets import (
    DatasetError,
    empty_memories,
    items_from_runs,
    load_hotpotqa,
    no_memories,
    read_records,
    stage1_records,
    stage2_records,
    with_memories,
    write_records,
)

HOTPOTQA_TRAIN = Path(__file__).resolve().parents[2] / "data" / "hotpotqa" / "train.jsonl"


def test_hotpotqa_questions_and_bad_files(tmp_path):
    items = load_hotpotqa(HOTPOTQA_TRAIN, limit=3)
    first = json.loads(HOTPOTQA_TRAIN.read_text(encoding="utf-8").splitlines()[0])
    assert len(items) == 3
    assert (items[0].question, items[0].ground_truth, items[0].source) == (first["question"], first["answer"], f"hotpotqa:{first['id']}")
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"id": "1", "question": "q", "answer": "a"}\nnot json\n', encoding="utf-8")
    with pytest.raises(DatasetError, match="broken.jsonl, line 2: not valid JSON.*Point `questions_file`"):
        load_hotpotqa(broken)
    with pytest.raises(DatasetError, match="no such question file"):
        load_hotpotqa(tmp_path / "missing.jsonl")


def test_stage_records_round_trip_through_parquet(tmp_path, tiny_model_dir, wiki_tools):
    items = with_memories(load_hotpotqa(HOTPOTQA_TRAIN, limit=2), no_memories)
    assert items[0].memory_context.startswith("Successful strategies: none found.")
    planner = Planner(EmbeddedChatModel(tiny_model_dir), max_new_tokens=12)
    stage1 = stage1_records(items, planner, tool_prompt_lines(wiki_tools.values()))
    assert all(r.plan_text.startswith("1.") and r.plan_steps for r in stage1)
    path = write_records(stage1, tmp_path / "stage1.parquet")
    assert read_records(path) == stage1
    stage2 = stage2_records(items)
    assert read_records(write_records(stage2, tmp_path / "stage2.parquet")) == stage2
    with pytest.raises(DatasetError, match="No usable questions"):
        write_records([], tmp_path / "empty.parquet")


def _log_run(runlog: RunLog, namespace: str, run_id: str, question: str, answer: str, *, truth: str | None = None,
             failed: bool = False) -> None:
    events = [RunStarted(run_id, question=question, namespace=namespace, ground_truth=truth),
              MemoriesRetrieved(run_id, successful=[{"question": "old q", "summary": "searched X", "correct": True}], failed=[]),
              PlanReady(run_id, text="1. Search", steps=["Search"])]
    events.append(RunFailed(run_id, message="boom") if failed else AnswerReady(run_id, text=answer))
    if truth and not failed:
        events.append(VerdictReady(run_id, label="correct", method="exact-match", ground_truth=truth))
    for event in events:
        runlog.append(namespace, event)


def test_items_from_runs_use_ground_truth_and_thumbs_up_only(tmp_path):
    runlog = RunLog(tmp_path / "runs")
    _log_run(runlog, "alice", "r1", "Who wrote Hamlet?", "Shakespeare", truth="William Shakespeare")
    _log_run(runlog, "alice", "r2", "Capital of France?", "Paris")  # thumbs up below
    _log_run(runlog, "alice", "r3", "Tallest mountain?", "K2")  # thumbs down: no label
    _log_run(runlog, "alice", "r4", "Largest ocean?", "")  # corrected by feedback
    _log_run(runlog, "alice", "r5", "Broken?", "", failed=True)
    _log_run(runlog, "bob", "b1", "Bob's private question?", "yes", truth="yes")
    from backend.feedback import FeedbackItem, FeedbackQueue
    from memory_db import MemoryStore

    app_store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}")  # the app's database, as the app keeps it
    queue = FeedbackQueue(app_store)
    for run_id, thumbs, right in [("r2", "up", None), ("r3", "down", None), ("r4", None, "Pacific Ocean"),
                                  ("b1", "down", None)]:
        queue.append(FeedbackItem(run_id=run_id, namespace="bob" if run_id == "b1" else "alice", user="u",
                                  question="q", answer="a", thumbs=thumbs, right_answer=right, comment=None,
                                  label_before="incorrect", label_after="incorrect", judge_method="thumbs",
                                  memory_id=None))
    app_store.close()
    items = {item.question: item for item in items_from_runs(tmp_path, "alice")}
    assert set(items) == {"Who wrote Hamlet?", "Capital of France?", "Largest ocean?"}
    assert items["Who wrote Hamlet?"].ground_truth == "William Shakespeare"
    assert items["Capital of France?"].ground_truth == "Paris"
    assert items["Largest ocean?"].ground_truth == "Pacific Ocean"
    assert "old q" in items["Who wrote Hamlet?"].memory_context
    assert items["Capital of France?"].source == "run:alice/r2"


def test_bad_feedback_is_reported_with_its_entry(tmp_path):
    from memory_db import MemoryStore

    RunLog(tmp_path / "runs").append("alice", RunStarted("r1", question="q?", namespace="alice"))
    app_store = MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}")
    app_store.enqueue("k1", namespace="alice", kind="feedback", run_id="r1", item={"run_id": "r1", "rating": 3})
    app_store.close()
    with pytest.raises(DatasetError, match="damaged entry .*entry 1 has unknown fields rating"):
        items_from_runs(tmp_path, "alice")
    with pytest.raises(DatasetError, match="cannot be opened"):
        items_from_runs(tmp_path, "alice", memory_url="mysql://nowhere/db")


def test_memory_context_comes_from_the_namespaces_own_store(tmp_path):
    from memory_db import MemoryStore, NewMemory, get_embedder

    from training.datasets import QuestionItem, store_memory_lookup

    with MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=get_embedder()) as store:
        store.add(NewMemory(question="When did the Russian Civil War end?", summary="Searched the war's article; the end date was in the first line.",
                            plan="1. Search", correct=True, namespace="alice"))
        store.add(NewMemory(question="When did the Russian Civil War start?", summary="Guessed without searching.",
                            plan="1. Guess", correct=False, namespace="alice"))
        store.add(NewMemory(question="When did the Russian Civil War end?", summary="Bob's private memo.",
                            plan="1. Search", correct=True, namespace="bob"))
        (item,) = with_memories([QuestionItem("How did the Russian Civil War end?", "x", "test")], store_memory_lookup(store, "alice"))
    assert "Successful strategies:\n1. (correct, unverified)" in item.memory_context and "first line" in item.memory_context
    assert "Failure lessons:\n1. (incorrect, unverified)" in item.memory_context and "Guessed" in item.memory_context
    assert "Bob" not in item.memory_context


# -- the plan of sub-questions (agent.plan_shape: subquestions) -----------------------------------

from tests.training.hops_example import DECOMPOSITION, FESTIVAL  # noqa: E402

WALKMAN_HOPS = [{"number": 1, "template": "Which company made the first Walkman?", "answer": "Sony",
                 "sentence": "Walkman: Sony made it."},
                {"number": 2, "template": "Who founded #1?", "answer": "Masaru Ibuka", "sentence": "Sony: founded by Ibuka."}]


def test_stage1_on_sub_questions_holds_the_planners_decompositions_and_round_trips(tmp_path, tiny_model_dir, wiki_tools):
    from tests.backend.scripted_model import ScriptedChatModel
    from training.datasets import QuestionItem

    items = with_memories(load_hotpotqa(HOTPOTQA_TRAIN, limit=2), empty_memories("subquestions"))
    assert [item.memory_context for item in items] == ["", ""]  # no memories: only the Planner's fixed examples
    planner = Planner(EmbeddedChatModel(tiny_model_dir), max_new_tokens=12)
    stage1 = stage1_records(items, planner, tool_prompt_lines(wiki_tools.values()), plan_shape="subquestions")
    for item, record in zip(items, stage1):  # each record holds what Planner.decompose writes (greedy)
        blueprint = planner.decompose(Question.parse(item.question), item.memory_context)
        assert (record.plan_text, record.plan_steps, record.plan_shape) == (blueprint.text, blueprint.steps, "subquestions")
        assert record.plan_text.startswith("1.") and record.plan_steps
    scripted = Planner(ScriptedChatModel("planner", [DECOMPOSITION]))
    (hops,) = stage1_records([QuestionItem(FESTIVAL, "Great Exuma", "test", "")], scripted, "search", "subquestions")
    assert hops.plan_steps == ["Which music festival was Billy McFarland charged with wire fraud for?",
                               "Where was #1 supposed to take place?"]  # the hops as written, #1 unfilled
    path = write_records([*stage1, hops], tmp_path / "stage1.parquet")
    assert read_records(path) == [*stage1, hops]
    stage2 = stage2_records(items, "subquestions")
    assert {r.plan_shape for r in stage2} == {"subquestions"}
    assert read_records(write_records(stage2, tmp_path / "stage2.parquet")) == stage2


def test_a_dataset_file_from_before_plan_shapes_reads_as_steps(tmp_path):
    import pandas as pd

    old = tmp_path / "old.parquet"
    pd.DataFrame([{"question": "q?", "ground_truth": "a", "source": "x", "memory_context": "m", "plan_text": "1. Search q",
                   "plan_steps": ["Search q"]}]).to_parquet(old, index=False)
    (record,) = read_records(old)
    assert (record.plan_shape, record.plan_steps) == ("steps", ["Search q"])
    bad = tmp_path / "bad.parquet"
    pd.DataFrame([{"question": "q?", "ground_truth": "a", "source": "x", "plan_shape": "hops"}]).to_parquet(bad, index=False)
    with pytest.raises(DatasetError, match="row 1: plan_shape must be"):
        read_records(bad)
    with pytest.raises(DatasetError, match="plan shape must be"):
        stage2_records([], "hops")


def test_sub_question_memories_are_the_worked_examples_the_app_shows(tmp_path):
    from backend.hops import worked_examples
    from backend.prompts.planner import worked_examples_text
    from memory_db import MemoryStore, NewMemory, get_embedder

    from training.datasets import QuestionItem, store_memory_lookup

    walkman = "Who founded the company that made the first Walkman?"
    with MemoryStore(f"sqlite:///{tmp_path / 'memory.sqlite'}", embedder=get_embedder()) as store:
        store.add(NewMemory(question=walkman, summary="Searched the Walkman, then its maker.", plan="1. x", correct=True,
                            namespace="alice", provenance={"decomposition": WALKMAN_HOPS, "verified": True}))
        (item,) = with_memories([QuestionItem("Who founded the company that made the first PlayStation?", "x", "t")],
                                store_memory_lookup(store, "alice", plan_shape="subquestions"))
    expected = worked_examples_text([(walkman, ["Which company made the first Walkman?", "Who founded #1?"],
                                      "the answer was right")])
    assert item.memory_context == expected and "2. Who founded #1?" in expected
    # from the app's runs: the memories a run was shown, as worked examples
    runlog = RunLog(tmp_path / "runs")
    shown = {"question": walkman, "summary": "s", "correct": True, "verified": True, "decomposition": WALKMAN_HOPS}
    for event in (RunStarted("r1", question=FESTIVAL, namespace="alice", ground_truth="Great Exuma"),
                  MemoriesRetrieved("r1", successful=[shown], failed=[]), AnswerReady("r1", text="Great Exuma")):
        runlog.append("alice", event)
    (run_item,) = items_from_runs(tmp_path, "alice", plan_shape="subquestions")
    assert run_item.memory_context == worked_examples_text(worked_examples([shown])) == expected


def test_a_plan_the_person_edited_is_their_example_in_both_stages(tmp_path):
    from backend.events import HopAnswered

    from tests.training.hops_example import FESTIVAL, HOPS

    mine = [HOPS[0], "On which island was #1 supposed to take place?"]
    runlog = RunLog(tmp_path / "runs")
    for event in (RunStarted("p1", question=FESTIVAL, namespace="alice", ground_truth="Great Exuma"),
                  PlanReady("p1", text="1. ...", steps=mine, source="person", drafted=HOPS),
                  HopAnswered("p1", turn=1, number=1, template=mine[0], question=mine[0], answer="Fyre Festival"),
                  AnswerReady("p1", text="Great Exuma")):
        runlog.append("alice", event)
    _log_run(runlog, "alice", "r1", "Who wrote Hamlet?", "Shakespeare", truth="William Shakespeare")
    items = {item.source: item for item in items_from_runs(tmp_path, "alice", plan_shape="subquestions")}
    assert items["run:alice/p1"].person_plan == mine and items["run:alice/r1"].person_plan == []
    assert items_from_runs(tmp_path, "alice", plan_shape="steps")[0].person_plan == []  # a plan of another shape

    class NoPlanner:  # stage 1 takes the person's plan: the Planner is not asked
        def decompose(self, *args, **kwargs):
            raise AssertionError("the Planner was asked for a plan the person wrote")

    (record,) = stage1_records(with_memories([items["run:alice/p1"]], empty_memories("subquestions")), NoPlanner(), "",
                               "subquestions")
    assert (record.plan_steps, record.plan_source, record.plan_text) == (mine, "person", "1. " + mine[0] + "\n2. " + mine[1])
    stage2 = stage2_records(items.values(), "subquestions")
    assert sorted((r.source, r.plan_source, r.plan_steps) for r in stage2) == [
        ("run:alice/p1", "person", mine), ("run:alice/r1", "planner", [])]
    assert read_records(write_records(stage2, tmp_path / "stage2.parquet")) == stage2
