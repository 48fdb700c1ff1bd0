"""RL datasets from HotpotQA JSONL and from the app's run log + feedback, as parquet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from backend.events import AnswerReady, MemoriesRetrieved, PlanReady, RunFailed, RunStarted, VerdictReady
from backend.llm.embedded import EmbeddedChatModel
from backend.planner import Planner
from backend.runlog import RunLog
from backend.tools.base import tool_prompt_lines
from training.datasets import (
    DatasetError,
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
