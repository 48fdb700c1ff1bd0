"""Strategies by question type: a memory of another question of the same type fills a place the
relevance floor left empty, and the Planner is shown how it was researched without any of its names."""

from __future__ import annotations

from dataclasses import replace

from app.render_html import transcript_of
from app.render_text import event_to_text
from backend.agent import ResearchAgent, RunRequest
from backend.events import MemoriesRetrieved, MemoryStored
from backend.runlog import RunLog
from backend.strategy import query_origin, strategy_outline
from memory_db import MemoryStore
from tests.backend.scripted_model import answer_turn as answer, tool_call_turn as call

BRIDGE = "What year was the director of the film Night Harbour born?"
OTHER_TIME = "In what year did the composer of the opera Glass Orchard die?"
CLOSED_TIME = "Was Arthur's Magazine or First for Women started first?"


def test_the_outline_describes_searches_by_where_their_queries_came_from_and_names_nothing():
    workflow = {
        "searches": [
            {"tool": "search", "queries": ["Night Harbour film"], "titles": ["Night Harbour", "Harbour Lights"]},
            {"tool": "search", "queries": ["Mira Okafor director"], "titles": ["Mira Okafor"]},
        ],
        "support_title": "Mira Okafor",
        "gold_retrieved": True,
    }
    workflow["searches"][0]["titles"].append("Mira Okafor")  # the first search's results named the director
    right = strategy_outline(BRIDGE, workflow, "1961", correct=True)
    assert right == ("searched for a name from the question, then for a name the first search found; "
                     "the answer was stated in the first search's results; it was right.")

    wrong = strategy_outline(BRIDGE, {**workflow, "searches": workflow["searches"][:1], "gold_retrieved": False,
                                      "support_title": None}, "Mira Okafor", correct=False)
    assert "a step on the way rather than what was asked" in wrong
    assert "the right answer was in no result: a further search was needed" in wrong
    for name in ("night", "harbour", "mira", "okafor", "1961"):
        assert name not in right.lower() and name not in wrong.lower()


def test_query_origins():
    earlier = [["Night Harbour", "Mira Okafor"]]
    assert query_origin(BRIDGE, BRIDGE, []) == "the whole question"
    assert query_origin("Night Harbour", BRIDGE, []) == "a name from the question"
    assert query_origin("Mira Okafor birth", BRIDGE, earlier) == "a name the first search found"
    assert query_origin("lighthouse keepers guild", BRIDGE, earlier) == "words of its own"


def same_type_config(tmp_path, plan_shape):
    from backend.config import RoleConfig, load_config

    base = load_config(environ={})
    return replace(base, data_dir=tmp_path, memory_url=f"sqlite:///{tmp_path / 'memory.sqlite'}",
                   agent=replace(base.agent, max_turns=3, reflections=0, sparse_memory_planner="planner",
                                 guided_actions="off", strategies_by_type=True, plan_shape=plan_shape),
                   roles={name: RoleConfig() for name in base.roles})


def asker(config, store, tools, model_class):
    """ask(question, executor outputs, plan=..., config=..., ground_truth=..., method=...) -> (events,
    planner): one run as alice, every role scripted (the Planner writes `plan`), in `store`."""
    runlog = RunLog(config.runs_dir)

    def ask(question, executor, plan="1. Search for the film", config=config, ground_truth=None, method="mia"):
        planner = model_class("planner", [plan], ["yes"])
        models = {"planner": planner, "executor": model_class("executor", executor),
                  "judge": model_class("judge"), "manager": model_class("manager")}
        agent = ResearchAgent(config, models=models, tools=tools, store=store, runlog=runlog)
        return list(agent.run(RunRequest(question, namespace="alice", ground_truth=ground_truth, method=method))), planner

    return ask


def test_a_same_type_memory_below_the_floor_is_shown_as_its_strategy_only_when_asked_for(
        tmp_path, shared_tools, embedder, scripted_model_class):
    config = same_type_config(tmp_path, "steps")
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    ask = asker(config, store, shared_tools, scripted_model_class)
    first, _ = ask(BRIDGE, [call("search", query_list=["Night Harbour film"]), answer("Night Harbour")],
                   ground_truth="1961")
    stored = store.get(next(e for e in first if isinstance(e, MemoryStored)).memory_id, namespace="alice")
    assert stored.question_type == "time" and not stored.correct
    assert stored.provenance["workflow"]["searches"][0]["queries"] == ["Night Harbour film"]

    events, planner = ask(OTHER_TIME, [answer("1990")])
    shown = next(e for e in events if isinstance(e, MemoriesRetrieved))
    assert [m["id"] for m in shown.failed] == [stored.id] and shown.successful == []
    lesson = shown.failed[0]["strategy"]
    assert lesson.startswith("searched for a name from the question")
    assert f"shown as its strategy, names left out: {lesson}" in event_to_text(shown)
    assert "shown as its strategy, names left out: searched for a name from the question" in transcript_of(events).trace_html()
    plan_prompt = planner.prompts[0][-1]["content"]
    assert "An earlier time question, names left out: " + lesson in plan_prompt
    assert "Night Harbour" not in plan_prompt  # neither its question nor its pages reach the Planner

    closed, _ = ask(CLOSED_TIME, [answer("Arthur's Magazine")])
    assert next(e for e in closed if isinstance(e, MemoriesRetrieved)).failed == []  # a closed question: another form

    off = replace(config, agent=replace(config.agent, strategies_by_type=False))
    events, planner = ask(OTHER_TIME, [answer("1990")], config=off)
    assert next(e for e in events if isinstance(e, MemoriesRetrieved)).failed == []
    assert "names left out" not in planner.prompts[0][-1]["content"]
    store.close()


def retrieved_ids(events) -> list[str]:
    shown = next(e for e in events if isinstance(e, MemoriesRetrieved))
    return [m["id"] for m in shown.successful + shown.failed]


def test_a_same_type_memory_is_retrieved_only_where_it_is_shown_without_names(tmp_path, shared_tools, embedder,
                                                                               scripted_model_class):
    """A plan of sub-questions is shown whole decompositions and the rag baseline whole trajectories,
    names and all: neither is given a memory of the question's type below the relevance floor."""
    config = same_type_config(tmp_path, "subquestions")
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    ask = asker(config, store, shared_tools, scripted_model_class)
    try:
        first, _ = ask(BRIDGE, ["Mira Okafor", "1961"],
                       plan="1. Who directed the film Night Harbour?\n2. What year was #1 born?", ground_truth="1961")
        stored = store.get(next(e for e in first if isinstance(e, MemoryStored)).memory_id, namespace="alice")
        assert stored.question_type == "time" and stored.provenance["decomposition"]
        events, planner = ask(OTHER_TIME, ["Ilse Varga", "1990"],
                              plan="1. Who composed the opera Glass Orchard?\n2. In what year did #1 die?")
        assert retrieved_ids(events) == []
        assert "Night Harbour" not in planner.prompts[0][-1]["content"]

        steps = replace(config, agent=replace(config.agent, plan_shape="steps"))
        events, _ = ask("In what year was the architect of the Copper Bridge born?", [answer("1870")],
                        config=steps, method="rag")
        assert stored.id not in retrieved_ids(events)
        events, _ = ask("In what year did the painter of the mural Salt Road die?", [answer("1955")], config=steps)
        assert stored.id in retrieved_ids(events)  # the Planner of steps is shown it as its strategy
    finally:
        store.close()
