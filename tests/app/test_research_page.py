"""The research page in headless Chromium: the answer first (working… then final) with citations that
open their passage, Stop, the report to download, and the Memory view's import choices, undo by click
and delete that asks first; the footer without Gradio's API page.

The server (logins on) runs a canned model in every role: it plans two searches, searches each
magazine, answers from what it found, and can be held after its first search until the test lets it
go on, so every run is the same and quick.
"""

from __future__ import annotations

import json
import threading

import pytest
from playwright.sync_api import expect

from app.research_runs import STOP_NOTE
from app.run_history import history_rows
from backend.llm.base import Choice, Completion, ModelTraits
from memory_db import NewMemory
from tests.app.conftest import export_memories, login
from tests.waiting import wait_until

pytestmark = pytest.mark.browser

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"
QUERIES = ["Arthur's Magazine", "First for Women"]


class CannedModel:
    """Plans a search per magazine, searches each, answers "Arthur's Magazine". While `held` is an unset
    event, the Executor's turns after its first search wait for it."""

    supports_images = False

    def __init__(self, role: str) -> None:
        self.role, self.name = role, f"canned:{role}"
        self.held: threading.Event | None = None
        self.traits = ModelTraits(small=False, guided_turns=False, executor_turns=4)

    def _searched(self, messages) -> int:
        return sum("<tool_call>" in m["content"] for m in messages if m["role"] == "assistant")

    def _wait_while_held(self, messages) -> None:
        if self.held is not None and self.role == "executor" and self._searched(messages) >= 1:
            assert self.held.wait(timeout=120), "the test never let the held Executor go on"

    def _text(self, messages) -> str:
        if self.role == "executor":
            searched = self._searched(messages)
            if searched < len(QUERIES):
                call = {"name": "search", "arguments": {"query_list": [QUERIES[searched]]}}
                return f"<think>look up {QUERIES[searched]}</think><tool_call>{json.dumps(call)}</tool_call>"
            return "<think>both found</think><answer>Arthur's Magazine</answer>"
        if self.role == "planner":
            return "1. Search for Arthur's Magazine\n2. Search for First for Women\n3. Compare the years"
        return "Searched each magazine and compared the years they were started."

    def generate(self, messages, *, max_new_tokens=256, stop=(), prefill="", temperature=0.0) -> Completion:
        self._wait_while_held(messages)
        text = self._text(messages)
        text = text[len(prefill):] if prefill and text.startswith(prefill) else text
        for s in stop:
            if s in text:
                text = text[: text.index(s)]
        return Completion(text=text, prompt_tokens=10, completion_tokens=len(text.split()), seconds=0.0,
                          finish_reason="stop")

    def stream(self, messages, **kwargs):
        completion = self.generate(messages, **kwargs)
        yield completion.text
        yield completion

    def choose(self, messages, options, *, prefill="") -> Choice:
        self._wait_while_held(messages)
        label = "yes" if "yes" in options else options[0]  # the reflection lets the answer stand
        return Choice(label=label, logprobs={o: (0.0 if o == label else -5.0) for o in options}, method="canned")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def canned_server(start_app):
    models = {role: CannedModel(role) for role in ("planner", "executor", "judge", "manager")}
    url, ctx = start_app(with_logins=True, models=models,
                         agent={"max_turns": 4, "sparse_memory_planner": "planner", "guided_actions": "off",
                                "plan_shape": "steps"})  # CannedModel plans in steps
    return url, ctx, models


@pytest.fixture
def go_on(canned_server):
    """Holds the Executor after its first search (for this test only); go_on() lets the run continue."""
    executor = canned_server[2]["executor"]
    executor.held = threading.Event()
    yield executor.held.set
    executor.held.set()
    executor.held = None


def question_box(page):
    return page.locator("#question textarea, #question input").first


def state(page) -> str:
    return page.locator("#answer-box .answer-box").get_attribute("data-state")


def research_until_the_first_step(page) -> None:
    question_box(page).fill(QUESTION)
    page.locator("#ask").click()
    page.locator("#trace").get_by_text("Step 1").wait_for(timeout=30_000)


def final(page, timeout: float = 60_000):
    page.locator('#answer-box .answer-box[data-state="final"]').wait_for(timeout=timeout)


def test_the_answer_shows_working_then_final_with_citations_that_open_their_passage(canned_server, go_on, new_page):
    url, ctx, _ = canned_server
    page = new_page()
    login(page, url, "alice")
    question_box(page).fill(QUESTION)
    question_box(page).press("Enter")  # Enter researches
    working = page.locator('#answer-box .answer-box[data-state="working"]')
    working.wait_for()
    expect(page.locator("#answer-box")).to_contain_text("working…")
    expect(page.locator("#ask")).to_be_disabled()
    expect(page.locator("#stop")).to_be_enabled()
    expect(page.locator("#answer-box .answer-eta")).to_contain_text("rough")
    page.locator("#trace").get_by_text("Step 1").wait_for()
    go_on()
    final(page)
    expect(page.locator("#ask")).to_be_enabled()
    expect(page.locator("#stop")).to_be_disabled()
    box = page.locator("#answer-box")
    expect(box.locator(".answer-text")).to_contain_text("Arthur's Magazine")
    expect(box).to_contain_text("Verdict:")
    assert page.locator("#answer-box .answer-eta").count() == 0

    # A citation mark opens the passage it cites, with its text as retrieved.
    marks = box.locator("button.cite")
    assert marks.count() >= 1
    panel = box.locator("details.citation").first
    assert panel.get_attribute("open") is None
    marks.first.click()
    expect(panel).to_have_attribute("open", "")
    text = panel.locator(".passage-text")
    expect(text).to_be_visible()
    expect(text).to_contain_text("Arthur's Magazine")
    assert "wiki" in panel.locator(".passage-meta").inner_text()

    # The trace: one line per step, what was searched and what came back; the thought inside.
    steps = page.locator("#trace details.step")
    assert steps.count() == 3
    first_line = steps.first.locator("summary").inner_text()
    assert "Step 1" in first_line and "search “Arthur's Magazine” →" in first_line and "passage" in first_line
    assert "look up" not in first_line
    steps.first.locator("summary").click()
    expect(steps.first).to_contain_text("Thought: look up Arthur's Magazine")
    page.set_viewport_size({"width": 1280, "height": 800})
    assert page.locator("#answer-box").bounding_box()["width"] <= 1280


def test_stop_ends_the_run_with_the_answer_so_far(canned_server, go_on, new_page):
    url, ctx, _ = canned_server
    page = new_page()
    login(page, url, "bob")
    memories_before = ctx.runtime.store.count(namespace="bob")
    research_until_the_first_step(page)
    page.locator("#stop").click()
    page.get_by_text(STOP_NOTE).wait_for()  # the server has the stop before the held Executor goes on
    go_on()
    page.locator('#answer-box .answer-box[data-state="stopped"]').wait_for(timeout=30_000)
    expect(page.locator("#answer-box")).to_contain_text("stopped")
    expect(page.locator("#ask")).to_be_enabled()
    expect(page.locator("#stop")).to_be_disabled()
    expect(page.locator("#trace")).to_contain_text("stopped by the user")
    [run] = ctx.runtime.runlog.list_runs("bob", limit=1)
    events = ctx.runtime.runlog.load("bob", run.run_id)
    assert events[-1].kind == "run_finished" and events[-1].stopped
    assert not any(e.kind in ("verdict", "memory_stored") for e in events)
    assert ctx.runtime.store.count(namespace="bob") == memories_before
    expect(page.locator("#download-report")).to_be_visible()  # a stopped run has its report too


def test_a_run_whose_tab_closed_finishes_into_a_real_history_row(canned_server, go_on, new_page):
    url, ctx, _ = canned_server
    page = new_page()
    login(page, url, "admin")
    research_until_the_first_step(page)
    [run] = ctx.runtime.runlog.list_runs("admin", limit=1)
    page.context.close()  # the tab goes away mid-run
    go_on()
    wait_until(lambda: run.run_id not in ctx.runs_under_way, 90, "the run to finish after its tab closed")
    events = ctx.runtime.runlog.load("admin", run.run_id)
    assert events[-1].kind == "run_finished" and not events[-1].stopped  # it ran to its end after the tab closed
    row = next(r for r in history_rows(ctx, "admin") if r[0] == run.run_id)
    assert row[3] == "Arthur's Magazine" and row[4] and "interrupted" not in row[4]


def test_the_report_downloads_with_the_answer_and_cited_passages_for_its_user_alone(canned_server, new_page, tmp_path):
    url, ctx, _ = canned_server
    page = new_page()
    login(page, url, "carol")
    question_box(page).fill(QUESTION)
    page.locator("#ask").click()
    final(page)
    with page.expect_download() as download:
        page.locator("#download-report").click()
    report = tmp_path / download.value.suggested_filename
    download.value.save_as(report)
    text = report.read_text(encoding="utf-8")
    assert report.suffix == ".md" and text.startswith(f"# Research report: {QUESTION}")
    assert "## Answer\n\n**Arthur's Magazine**" in text
    sources = text.split("## Sources")[1].split("## Plan")[0]
    assert "Cited sentence:" in sources and "Passage as retrieved:" in sources and "   > " in sources
    assert "1. Search for Arthur's Magazine" in text and "- Turn 1: search “Arthur's Magazine” →" in text
    report_url = download.value.url

    with page.expect_download() as download:
        page.locator("#download-json").click()
    document = json.loads(open(download.value.path(), encoding="utf-8").read())
    kinds = [e["kind"] for e in document["events"]]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished" and "delta" not in kinds

    other = new_page()
    login(other, url, "alice")
    assert other.request.get(report_url).status == 404  # the report is carol's alone
    assert page.request.get(report_url).status == 200

    # Refused questions leave no row in the past runs; a past run reopens with its report.
    question_box(page).fill("   ")
    page.locator("#ask").click()
    page.locator('#answer-box .answer-box[data-state="failed"]').wait_for()
    expect(page.locator("#download-report")).to_be_hidden()
    page.locator("#history").get_by_text("Your past runs").click()
    [run] = ctx.runtime.runlog.list_runs("carol")  # the refused question left no row
    table = page.locator("#history-table")
    expect(table).to_contain_text(run.run_id)
    assert table.get_by_text("failed").count() == 0
    table.get_by_text(run.run_id).filter(visible=True).first.click()  # a click on the row reopens it
    final(page)
    expect(page.locator("#feedback-result")).to_contain_text("Reopened run")
    expect(page.locator("#download-report")).to_be_visible()

    # After a thumbs down with the right answer, past runs show the person's verdict, and the report
    # downloaded now carries their correction.
    page.locator("#right-answer input, #right-answer textarea").first.fill("First for Women")
    page.locator("#thumbs-down").click()
    page.locator("#feedback-result").get_by_text("Feedback applied").wait_for()
    expect(page.locator("#history-table")).to_contain_text("incorrect (you corrected it)")
    expect(page.locator("#answer-box")).to_contain_text(
        "Your feedback: incorrect (you corrected it); the right answer, as you typed it: First for Women")
    with page.expect_download() as download:
        page.locator("#download-report").click()
    corrected = (tmp_path / "corrected.md")
    download.value.save_as(corrected)
    assert ("- **Correction by a person**: the right answer is **First for Women** (typed by carol, "
            in corrected.read_text(encoding="utf-8"))


def add_memory(ctx, namespace: str, question: str):
    return ctx.runtime.store.add(NewMemory(question=question, summary="Search each magazine, compare founding years.",
                                           plan="1. search\n2. compare", correct=True, namespace=namespace,
                                           provenance={"verified": True, "verdict_source": "person"}))


def open_memory(page, memory_id: str) -> None:
    page.get_by_role("tab", name="Memory").click()
    page.locator("#memory-count").get_by_text("memories in namespace").wait_for()
    page.locator("#memory-id input, #memory-id textarea").first.fill(memory_id)
    page.locator("#memory-open").click()
    page.locator("#memory-detail-text").get_by_text(memory_id).wait_for()


def test_importing_ones_own_export_back_offers_skip_or_replace(canned_server, new_page, tmp_path):
    url, ctx, _ = canned_server
    memory = add_memory(ctx, "alice", "Who founded Arthur's Magazine?")
    page = new_page()
    login(page, url, "alice")
    open_memory(page, memory.id)
    exported = export_memories(page, tmp_path)
    ctx.runtime.store.edit(memory.id, namespace="alice", summary="Edited after the export.", actor="alice")

    page.locator("#import-file input[type=file]").set_input_files(exported)
    preview = page.locator("#import-preview-text")
    preview.get_by_text("already here (same id)").wait_for()
    expect(page.locator("#import-preview")).to_contain_text("already here")
    choice = page.locator("#import-existing")
    expect(choice).to_be_visible()
    choice.get_by_text("Skip them").click()
    page.locator("#memory-import").click()
    page.locator("#import-result").get_by_text("skipped: already here").wait_for()
    assert ctx.runtime.store.get(memory.id, namespace="alice").summary == "Edited after the export."

    choice.get_by_text("Replace them").click()
    page.locator("#memory-import").click()
    page.locator("#import-result").get_by_text("replaced").wait_for()
    assert ctx.runtime.store.get(memory.id, namespace="alice").summary == "Search each magazine, compare founding years."
    assert ctx.runtime.store.history(memory.id, namespace="alice")[0].action == "import"


def test_undo_is_a_click_on_the_change_and_delete_asks_first(canned_server, new_page):
    url, ctx, _ = canned_server
    memory = add_memory(ctx, "bob", "When was First for Women started?")
    store = ctx.runtime.store
    store.edit(memory.id, namespace="bob", summary="Only the first result.", actor="bob")
    store.pin(memory.id, namespace="bob", actor="bob")
    page = new_page()
    login(page, url, "bob")
    open_memory(page, memory.id)
    history = page.locator("#memory-history")
    expect(history).to_contain_text("edit")
    newest = store.history(memory.id, namespace="bob")[0]
    expect(page.locator("#undo-selected")).to_contain_text(f"change {newest.id} (pin")
    edit = next(e for e in store.history(memory.id, namespace="bob") if e.action == "edit")
    history.get_by_role("gridcell", name="edit", exact=True).first.click()  # the older change, not the newest
    expect(page.locator("#undo-selected")).to_contain_text(f"change {edit.id} (edit")
    page.locator("#memory-undo").click()
    page.locator("#memory-action-result").get_by_text(f"Undid change {edit.id}").wait_for()
    restored = store.get(memory.id, namespace="bob")
    assert restored.summary == memory.summary and restored.pinned  # the edit undone, the later pin kept

    page.locator("#memory-delete").click()
    confirm = page.locator("#delete-confirm")
    expect(confirm).to_be_visible()
    expect(confirm).to_contain_text(f"Delete memory {memory.id[:8]}?")
    assert store.count(namespace="bob") >= 1 and store.get(memory.id, namespace="bob")  # nothing deleted yet
    page.locator("#memory-delete-cancel").click()
    page.locator("#memory-action-result").get_by_text("Nothing was deleted").wait_for()
    expect(confirm).to_be_hidden()
    page.locator("#memory-delete").click()
    page.locator("#memory-delete-yes").click()
    page.locator("#memory-action-result").get_by_text("Deleted").wait_for()
    assert memory.id not in [m.id for m in store.list(namespace="bob")]


def test_the_footer_shows_no_api_or_runs_page(canned_server, new_page):
    url, _, _ = canned_server
    page = new_page()
    login(page, url, "alice")
    footer = page.locator("footer")
    expect(footer).to_contain_text("Built with Gradio")
    assert "API" not in footer.inner_text() and "Runs" not in footer.inner_text()
