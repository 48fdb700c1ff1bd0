"""`python -m app ask --review-plan` and `--follow-up RUN_ID`: the plan printed and read back as edited
(from standard input here, as a script or a pipe gives it), a malformed edit refused with the Planner's
plan given back, and a follow-up read with its thread. Scripted models on the real loop and index."""

from __future__ import annotations

import argparse
import io
import sys

import pytest

from app.cli import steered_request
from backend.agent import ResearchAgent, RunRequest
from backend.events import PlanReady
from backend.plan_review import PlanError
from backend.runlog import RunLog
from memory_db import MemoryStore
from tests.backend.conftest import scripted_config
from tests.backend.scripted_model import ScriptedChatModel
from tests.training.hops_example import DECOMPOSITION, FESTIVAL, HOPS


@pytest.fixture
def agent(tmp_path, shared_tools, embedder):
    config = scripted_config(tmp_path, plan_shape="subquestions")
    store = MemoryStore(config.resolved_memory_url, embedder=embedder)
    models = {"planner": ScriptedChatModel("planner", [DECOMPOSITION, DECOMPOSITION]),
              "executor": ScriptedChatModel("executor", ["Fyre Festival", "Great Exuma", "Fyre Festival"]),
              "judge": ScriptedChatModel("judge"), "manager": ScriptedChatModel("manager")}
    yield ResearchAgent(config, models=models, tools=shared_tools, store=store, runlog=RunLog(config.runs_dir))
    store.close()


def options(**given) -> argparse.Namespace:
    return argparse.Namespace(**{"follow_up": None, "review_plan": False, **given})


def test_the_plan_is_printed_and_read_back_as_the_person_edited_it(agent, monkeypatch):
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stdin", io.StringIO(f"# my edit\n1. {HOPS[0]}\n2. On which island was #1 held?\n"))
    request = steered_request(agent, RunRequest(FESTIVAL), options(review_plan=True), printed)
    assert "# The Planner's plan for: " + FESTIVAL in printed.getvalue() and DECOMPOSITION in printed.getvalue()
    assert request.plan == [HOPS[0], "On which island was #1 held?"] and request.drafted_plan == HOPS
    plan = next(e for e in agent.run(request) if isinstance(e, PlanReady))
    assert plan.source == "person" and plan.steps == request.plan

    monkeypatch.setattr(sys, "stdin", io.StringIO("1. Where was #2 held?\n2. Which festival?\n"))
    with pytest.raises(PlanError) as refused:
        steered_request(agent, RunRequest(FESTIVAL), options(review_plan=True), io.StringIO())
    assert "Sub-question 1 refers to #2, which comes after it" in str(refused.value)
    assert str(refused.value).endswith(f"The Planner's plan was:\n{DECOMPOSITION}")


def test_a_follow_up_names_the_run_it_follows_and_is_read_with_its_thread(agent):
    first = [e for e in agent.run(RunRequest(FESTIVAL, plan=HOPS))][0].run_id
    printed = io.StringIO()
    request = steered_request(agent, RunRequest("Which festival was he charged with wire fraud for?"),
                              options(follow_up=first), printed)
    assert request.question == "Which festival was Billy McFarland charged with wire fraud for?"
    assert request.follow_up.of_run == first and request.follow_up.asked.startswith("Which festival was he")
    assert f"Follow-up of run {first}: researched as \"{request.question}\"" in printed.getvalue()
