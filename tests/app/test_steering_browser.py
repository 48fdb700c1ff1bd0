"""The analyst steers the research, in headless Chromium: the Planner's plan reviewed and edited before it
runs, then researched exactly as written; a follow-up under an answer, read with its thread, its
rewritten question and answer shown, the thread one entry in History. Scripted models answer in every
role, so each run is the same each time."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from backend.replay import replay
from tests.app.conftest import ask_until_final, login
from tests.backend.scripted_model import ScriptedChatModel
from tests.training.hops_example import DECOMPOSITION, FESTIVAL, HOPS

pytestmark = pytest.mark.browser

MY_HOP = "On which island was #1 supposed to take place?"


def scripted(planner: list[str], reader: list[str]) -> dict:
    return {"planner": ScriptedChatModel("planner", planner), "executor": ScriptedChatModel("executor", reader),
            "judge": ScriptedChatModel("judge"), "manager": ScriptedChatModel("manager")}


def test_a_plan_edited_before_it_runs_is_researched_as_written(start_app, new_page):
    models = scripted([DECOMPOSITION], ["Fyre Festival", "Great Exuma"])
    url, ctx = start_app(with_logins=True, models=models, agent={"sparse_memory_planner": "planner"})
    page = new_page()
    login(page, url, "alice")
    page.locator("#review-plan input[type=checkbox]").check()
    page.locator("#question textarea, #question input").first.fill(FESTIVAL)
    page.locator("#ask").click()
    editor = page.locator("#plan-editor textarea")
    expect(editor).to_have_value(DECOMPOSITION, timeout=60_000)
    assert not ctx.runtime.runlog.list_runs("alice")  # drafted, not researched

    editor.fill(f"1. {MY_HOP.replace('#1', '#2')}\n2. {HOPS[0]}")  # moved up, referring to the hop below it
    page.locator("#run-plan").click()
    expect(page.locator("#plan-note")).to_contain_text("Sub-question 1 refers to #2, which comes after it")
    expect(editor).to_have_value(DECOMPOSITION)  # the Planner's plan is given back
    assert not ctx.runtime.runlog.list_runs("alice")

    editor.fill(f"1. {HOPS[0]}\n2. {MY_HOP}")
    page.locator("#run-plan").click()
    page.locator('#answer-box .answer-box[data-state="final"]').wait_for(timeout=90_000)
    expect(page.locator("#answer-box .answer-text")).to_contain_text("Great Exuma")
    plan = page.locator("#trace details.plan", has_text="Your plan of sub-questions").first
    expect(plan).to_contain_text(f"{MY_HOP} → Great Exuma")
    plan.locator("summary").click()
    expect(plan).to_contain_text("edited from the Planner's draft")
    expect(editor).to_be_hidden()  # the editor goes once its plan runs
    (run,) = ctx.runtime.runlog.list_runs("alice")
    logged = replay(ctx.runtime.runlog.load("alice", run.run_id))
    assert logged.plans[0].steps == [HOPS[0], MY_HOP] and logged.plans[0].source == "person"
    assert logged.plans[0].drafted == HOPS
    assert len(models["planner"].prompts) == 1  # the draft only: the run asked the Planner nothing


def test_a_follow_up_is_read_with_its_thread_and_shown_rewritten(start_app, new_page):
    models = scripted([DECOMPOSITION], ["Fyre Festival", "Great Exuma", "Fyre Festival"])
    url, ctx = start_app(with_logins=True, models=models, agent={"sparse_memory_planner": "planner"})
    page = new_page()
    login(page, url, "bob")
    ask_until_final(page, FESTIVAL)
    expect(page.locator("#answer-box .answer-text")).to_contain_text("Great Exuma")

    page.locator("#follow-up-question input, #follow-up-question textarea").first.fill(
        "Which festival was he charged with wire fraud for?")
    page.locator("#ask-follow-up").click()
    rewritten = "Which festival was Billy McFarland charged with wire fraud for?"
    expect(page.locator("#follow-up-rewrite input, #follow-up-rewrite textarea").first).to_have_value(rewritten)
    box = page.locator("#answer-box")
    page.locator('#answer-box .answer-box[data-state="final"] .follow-up-read').wait_for(timeout=90_000)
    expect(box.locator(".follow-up-read")).to_contain_text("you asked “Which festival was he charged with wire fraud for?”")
    expect(box.locator(".rewritten")).to_have_text(rewritten)
    expect(box.locator(".thread")).to_contain_text("Great Exuma")  # the thread's earlier question and answer
    expect(box.locator(".answer-text")).to_contain_text("Fyre Festival")
    expect(box.locator(".citations")).to_contain_text("Billy McFarland")  # cited from the thread's passages
    expect(page.locator("#trace")).not_to_contain_text("🔍 search")  # nothing searched again

    runs = ctx.runtime.runlog.list_runs("bob")
    assert len(runs) == 2 and runs[0].thread == runs[1].run_id  # each answer its own run, in one thread
    page.locator("#history").get_by_text("Your past runs").click()
    table = page.locator("#history-table")
    expect(table).to_contain_text("(+1 follow-up, the latest: Which festival was he charged with wire fraud for?)")
    expect(table).not_to_contain_text(runs[1].run_id)  # one entry: the thread's latest run
