"""The whole loop on the tiny random model: real generation, real index, real store."""

from __future__ import annotations

from dataclasses import replace

import pytest

from backend.agent import RunRequest
from backend.events import (
    AnswerReady,
    MemoriesRetrieved,
    MemoryStored,
    PlanReady,
    Recovery,
    ReflectionDecided,
    RunFailed,
    RunFinished,
    RunStarted,
    TextDelta,
    ToolCalled,
    ToolReturned,
    VerdictReady,
)

# The first HotpotQA dev question; its paragraphs are in the sandbox wiki.
QUESTION = 'The band who released the debut album "Tinted Windows" had their first performance in what city?'
GOLD = "Tulsa"


def kinds(events):
    return [type(e) for e in events]


@pytest.mark.parametrize("plan_shape", ["subquestions", "steps"])
def test_full_loop_emits_every_stage_and_stores_a_memory(tmp_path, tiny_model_dir, build_agent, plan_shape):
    tiny_agent = build_agent(tmp_path, tiny_model_dir, guided_actions="off", plan_shape=plan_shape)
    events = list(tiny_agent.run(RunRequest(QUESTION, ground_truth=GOLD)))
    types = kinds(events)
    assert types[0] is RunStarted and types[-1] is RunFinished, [e.to_dict() for e in events if isinstance(e, RunFailed)]
    assert types.index(MemoriesRetrieved) < types.index(PlanReady) < types.index(ToolCalled)
    assert types.index(AnswerReady) < types.index(VerdictReady) < types.index(MemoryStored)
    plan = next(e for e in events if isinstance(e, PlanReady))
    # A plan of steps is reflected on. The random model writes no numbered sub-question, so a plan of
    # sub-questions is the question itself as one hop, researched by the Executor's own turns, no replan.
    assert (ReflectionDecided in types) is (plan_shape == "steps")
    assert (plan.steps == [QUESTION]) is (plan_shape == "subquestions")
    # The random model never writes the protocol, so the first turn recovers by searching the question.
    first_recovery = next(e for e in events if isinstance(e, Recovery))
    assert first_recovery.action == "searching the question itself"
    first_response = next(e for e in events if isinstance(e, ToolReturned))
    assert first_response.ok and first_response.passages
    assert any(p["title"] == "Tinted Windows (band)" for p in first_response.passages)
    stored = next(e for e in events if isinstance(e, MemoryStored))
    memory = tiny_agent.store.get(stored.memory_id, namespace="default")
    assert memory.question == QUESTION
    assert memory.provenance["run_id"] == events[0].run_id
    assert memory.provenance["ground_truth"] == GOLD
    finished = events[-1]
    assert finished.stats["llm_calls"] >= 4 and finished.stats["tool_calls"] >= 1
    assert finished.stats["prompt_tokens"] > 0


def test_run_is_logged_and_reloadable(tiny_agent):
    events = list(tiny_agent.run(RunRequest(QUESTION, namespace="alice")))
    deltas = [e for e in events if isinstance(e, TextDelta)]
    assert deltas, "Executor turns stream as they form"
    kept = [e for e in events if not isinstance(e, TextDelta)]
    assert tiny_agent.runlog.load("alice", events[0].run_id) == kept
    assert [r.run_id for r in tiny_agent.runlog.list_runs("alice")] == [events[0].run_id]


def test_second_question_retrieves_the_first_memory_and_credits_it(tiny_agent):
    first = list(tiny_agent.run(RunRequest(QUESTION, ground_truth=GOLD)))
    stored = next(e for e in first if isinstance(e, MemoryStored))
    second = list(tiny_agent.run(RunRequest(QUESTION + " Answer briefly.", ground_truth=GOLD)))
    retrieved = next(e for e in second if isinstance(e, MemoriesRetrieved))
    shown = [m["id"] for m in retrieved.successful + retrieved.failed]
    assert stored.memory_id in shown
    verdict = next(e for e in second if isinstance(e, VerdictReady))
    memory = tiny_agent.store.get(stored.memory_id, namespace="default")
    assert memory.usage_count == 2
    assert memory.success_count == (2 if verdict.label == "correct" else 1)


def test_namespaces_do_not_share_memories(tiny_agent):
    list(tiny_agent.run(RunRequest(QUESTION, namespace="alice", ground_truth=GOLD)))
    bob = list(tiny_agent.run(RunRequest(QUESTION, namespace="bob")))
    retrieved = next(e for e in bob if isinstance(e, MemoriesRetrieved))
    assert retrieved.successful == [] and retrieved.failed == []


@pytest.mark.parametrize(
    "request_kwargs, message",
    [
        ({"question": ""}, "empty"),
        ({"question": "x" * 5000}, "limit"),
        ({"question": "Q?", "method": "magic"}, "Unknown method"),
    ],
)
def test_bad_input_fails_cleanly_and_stores_nothing(tiny_agent, request_kwargs, message):
    events = list(tiny_agent.run(RunRequest(**request_kwargs)))
    assert len(events) == 1 and isinstance(events[0], RunFailed)
    assert message in events[0].message
    assert tiny_agent.store.count(namespace="default") == 0


def test_non_image_upload_fails_cleanly(tiny_agent, tmp_path):
    fake = tmp_path / "photo.png"
    fake.write_bytes(b"%PDF-1.4 not an image")
    events = list(tiny_agent.run(RunRequest(QUESTION, image=str(fake))))
    assert isinstance(events[-1], RunFailed) and "not an image" in events[-1].message


@pytest.mark.parametrize("method", ["none", "plan", "rag", "trace", "memento"])
def test_baseline_methods_run_their_parts(tmp_path, tiny_model_dir, build_agent, method):
    # Plans of steps: every step plan is reflected on (a one-hop plan of sub-questions is not).
    tiny_agent = build_agent(tmp_path, tiny_model_dir, plan_shape="steps")
    events = list(tiny_agent.run(RunRequest(QUESTION, method=method, ground_truth=GOLD)))
    types = kinds(events)
    assert types[-1] is RunFinished
    assert (PlanReady in types) is (method in ("plan", "memento"))
    assert (MemoriesRetrieved in types) is (method in ("rag", "trace", "memento"))
    assert (MemoryStored in types) is (method in ("rag", "trace", "memento"))
    assert (ReflectionDecided in types) is (method == "plan")  # plan is the mia loop without memory
    # The turn cap: 2 turns a plan; plan's replan adds a supplementary round of at least 2.
    assert sum(isinstance(e, ToolCalled) for e in events) <= (4 if method == "plan" else 2)


def test_time_limit_forces_the_answer(tiny_agent):
    tiny_agent.config = replace(tiny_agent.config, agent=replace(tiny_agent.config.agent, max_seconds=0.001))
    events = list(tiny_agent.run(RunRequest(QUESTION)))
    answer = next(e for e in events if isinstance(e, AnswerReady))
    assert answer.forced and answer.reason == "time limit reached"


def test_guided_turns_search_first_then_choose_between_actions(tiny_agent):
    assert tiny_agent.config.agent.guided_for(tiny_agent.models["executor"].traits)
    events = list(tiny_agent.run(RunRequest(QUESTION, method="none")))
    first_call = next(e for e in events if isinstance(e, ToolCalled))
    assert first_call.name == "search" and len(first_call.arguments["query_list"]) == 1
    recovery = next(e for e in events if isinstance(e, Recovery))
    assert recovery.action == "first action is search"
    # Every later turn is a constrained choice, so the protocol is never broken: no parse recoveries.
    assert not any("<tool_call>" in e.reason or "JSON" in e.reason for e in events if isinstance(e, Recovery))
    assert isinstance(events[-1], RunFinished)
