"""The research page with the default plan, sub-questions, in headless Chromium: the plan is shown as
its sub-questions, each with the answer it got and the page whose sentence states it, and the answer
is the last hop's. A scripted model answers in every role, so the run is the same each time."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.app.conftest import ask_until_final, login
from tests.backend.scripted_model import ScriptedChatModel
from tests.training.hops_example import DECOMPOSITION, FESTIVAL

pytestmark = pytest.mark.browser


def test_the_plan_shows_each_sub_question_with_its_answer_and_source(start_app, new_page):
    models = {"planner": ScriptedChatModel("planner", [DECOMPOSITION]),
              "executor": ScriptedChatModel("executor", ["Fyre Festival", "Great Exuma"]),
              "judge": ScriptedChatModel("judge"), "manager": ScriptedChatModel("manager")}
    url, ctx = start_app(with_logins=True, models=models, agent={"sparse_memory_planner": "planner"})
    assert ctx.runtime.config.agent.plan_shape == "subquestions"  # the default plan
    page = new_page()
    login(page, url, "alice")
    ask_until_final(page, FESTIVAL)
    expect(page.locator("#answer-box .answer-text")).to_contain_text("Great Exuma")
    plan = page.locator("#trace details.plan", has_text="Plan of sub-questions").first
    expect(plan).to_contain_text("Which music festival was Billy McFarland charged with wire fraud for? → Fyre Festival")
    expect(plan).to_contain_text("Where was #1 supposed to take place? → Great Exuma")
    expect(plan).to_contain_text("(Fyre Festival)")  # the page whose sentence states the first hop's answer
