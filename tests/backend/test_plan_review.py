"""A plan the person reviews before it runs (backend.plan_review): the Planner's draft, edited, checked,
and researched exactly as written, recorded as the person's in the events, the run log and the memory.
The real loop, store and search index; scripted models say what a model would write."""

from __future__ import annotations

import pytest

from backend.agent import ResearchAgent, RunRequest
from backend.events import HopAnswered, MemoryStored, PlanReady, RunFailed, RunStarted
from backend.hops import worked_examples
from backend.manager import memory_to_dict
from backend.plan_review import MAX_PERSON_STEPS, PlanError, checked_plan, parse_plan_text, plan_text
from backend.replay import replay
from backend.runlog import RunLog
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.training.hops_example import DECOMPOSITION, FESTIVAL, HOPS


def test_an_edited_plan_is_read_from_its_lines_whatever_their_numbers_say():
    edited = "# comments and blank lines are left out\n\n2. Where was #1 supposed to take place?\n1) Which festival?\n  third hop  \n"
    assert parse_plan_text(edited) == ["Where was #1 supposed to take place?", "Which festival?", "third hop"]
    assert parse_plan_text(plan_text(HOPS)) == HOPS
    assert parse_plan_text("#1's director?") == ["#1's director?"]  # a reference, not a comment


@pytest.mark.parametrize("steps, says", [
    ([], "The plan is empty"),
    (["   ", ""], "The plan is empty"),
    (["Where was #2 supposed to take place?", "Which festival?"], "Sub-question 1 refers to #2, which comes after it"),
    (["Which festival?", "Where was #2 held?"], "Sub-question 2 refers to its own answer"),
    (["Which festival?", "Where was #5 held?"], "refers to #5, but the plan has 2 sub-questions"),
    (["Which festival?", "Where was #0 held?"], "refers to #0"),
    ([f"Question {n}?" for n in range(MAX_PERSON_STEPS + 1)], f"the limit is {MAX_PERSON_STEPS}"),
    (["x" * 50], "Sub-question 1 is 50 characters long; the limit is 40"),
])
def test_a_malformed_plan_is_refused_with_what_to_change(steps, says):
    with pytest.raises(PlanError) as refused:
        checked_plan(steps, "subquestions", max_chars=40)
    assert says in str(refused.value)
    assert str(refused.value).endswith(".")


def test_a_plan_of_steps_may_mention_hashes_and_is_kept_as_written():
    steps = ["Search for the #1 hit of 1999", "  compare   them  "]
    assert checked_plan(steps, "steps", max_chars=100) == ["Search for the #1 hit of 1999", "compare them"]


@pytest.fixture
def agent(tmp_path, shared_tools, embedder, scripted_model_class):
    config = scripted_config(tmp_path, plan_shape="subquestions", min_memory_similarity=-1.0)
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)

    def build(planner_outputs, reader_outputs):
        models = {"planner": scripted_model_class("planner", planner_outputs),
                  "executor": scripted_model_class("executor", reader_outputs),
                  "judge": scripted_model_class("judge"), "manager": scripted_model_class("manager")}
        return ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))

    build.store = store
    yield build
    store.close()


def test_the_persons_plan_is_researched_as_written_and_kept_as_theirs(agent):
    research = agent([DECOMPOSITION], ["Fyre Festival", "Ja Rule", "Great Exuma"])
    draft = research.draft_plan(RunRequest(FESTIVAL, namespace="alice"))
    assert draft.steps == HOPS and draft.shape == "subquestions" and draft.text.startswith("1. Which music festival")
    # The person adds a hop the Planner's checks would leave out (it shares no word with the question) and
    # words the last one their own way.
    edited = [HOPS[0], "Who promoted #1 with Billy McFarland?", "On which island was #1 supposed to take place?"]
    events = list(research.run(RunRequest(FESTIVAL, namespace="alice", ground_truth="Great Exuma", plan=edited,
                                          drafted_plan=draft.steps)))
    assert len(research.models["planner"].prompts) == 1  # the draft: the run never asked the Planner again
    plan = next(e for e in events if isinstance(e, PlanReady))
    assert (plan.steps, plan.source, plan.drafted) == (edited, "person", HOPS)
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert [h.template for h in hops][:3] == edited  # (a hop no sentence states is then redone, as written)
    assert hops[2].question == "On which island was Fyre Festival supposed to take place?"
    assert replay(events).plans[0].source == "person"  # as the run log keeps it
    logged = replay(research.runlog.load("alice", events[0].run_id))
    assert logged.plans[0].source == "person" and logged.plans[0].drafted == HOPS

    stored = agent.store.get(next(e for e in events if isinstance(e, MemoryStored)).memory_id, namespace="alice")
    assert stored.provenance["plan_source"] == "person" and stored.provenance["planner_draft"] == HOPS
    assert [h["template"] for h in stored.provenance["decomposition"]] == edited
    # Verified by the ground truth, it is a worked example a later Planner is shown, said to be a person's plan.
    found = agent.store.search_contrastive(FESTIVAL, namespace="alice", k=2)
    shown = [memory_to_dict(m) for m in found.successful + found.failed]
    example = worked_examples(shown)
    assert example and example[0][1] == edited and "a person wrote this plan" in example[0][2]


def test_a_persons_single_sub_question_is_researched_as_a_hop_of_its_own(agent):
    research = agent([], ["Fyre Festival", "Great Exuma"])
    events = list(research.run(RunRequest(FESTIVAL, namespace="alice", plan=[HOPS[0]])))
    hops = [e for e in events if isinstance(e, HopAnswered)]
    assert [h.template for h in hops][:1] == [HOPS[0]] and hops[0].queries[0] == HOPS[0]


def test_a_malformed_plan_never_runs(agent):
    research = agent([], [])
    events = list(research.run(RunRequest(FESTIVAL, namespace="alice", plan=["Where was #2 held?", "Which festival?"])))
    assert len(events) == 1 and isinstance(events[0], RunFailed)
    assert "Sub-question 1 refers to #2, which comes after it" in events[0].message
    assert not any(isinstance(e, RunStarted) for e in events)
