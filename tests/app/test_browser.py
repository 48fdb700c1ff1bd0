"""The app in headless Chromium: research, feedback, memory curation, export/import, two users.

One server (logins on, tiny random model in every role) serves every test in this file.
"""

from __future__ import annotations

import threading

import pytest
from playwright.sync_api import expect

from memory_db import NewMemory
from tests.app.conftest import ask_until_final, export_memories, login

pytestmark = pytest.mark.browser

QUESTION = "Which magazine was started first, Arthur's Magazine or First for Women?"


def question_box(page):
    return page.locator("#question textarea, #question input").first


def research(page, question: str = QUESTION) -> str:
    """Runs a question; returns the answer box's and the trace's text."""
    question_box(page).fill(question)
    page.locator("#ask").click()
    page.locator("#trace").get_by_text("📊 Run summary").wait_for(timeout=90_000)
    return page.locator("#answer-box").inner_text() + "\n" + page.locator("#trace").inner_text()


def add_memory(ctx, namespace: str, question: str, summary: str = "Search each magazine, compare founding years."):
    # a memory a person curated (a demo's seed): verified, so the Planner is shown it
    return ctx.runtime.store.add(NewMemory(question=question, summary=summary, plan="1. search\n2. compare",
                                           correct=True, namespace=namespace,
                                           provenance={"verified": True, "verdict_source": "person"}))


def open_memory_tab(page) -> None:
    page.get_by_role("tab", name="Memory").click()
    page.locator("#memory-count").get_by_text("memories in namespace").wait_for()


def test_a_question_shows_memories_plan_tool_steps_answer_and_summary(app_server, new_page):
    url, ctx = app_server
    page = new_page()
    login(page, url, "alice", "alice-pass")
    trace = research(page)
    for expected in ("Memories:", "Plan", "Step 1", "search “", "Verdict:", "Memory stored", "Run summary"):
        assert expected in trace
    assert page.locator("#answer-box .answer-box").get_attribute("data-state") == "final"
    page.locator("#trace").get_by_text("Step 1").first.click()  # a step opens to show its passages
    assert "arguments:" in page.locator("#trace").inner_text()
    runs = ctx.runtime.runlog.list_runs("alice")
    assert runs and runs[0].question == QUESTION

    question_box(page).fill("   ")
    page.locator("#ask").click()
    page.locator("#trace").get_by_text("The question is empty").wait_for()
    page.locator('#answer-box .answer-box[data-state="failed"]').wait_for()

    # The finished run is in the history and reopens with its full trace.
    page.locator("#history").get_by_text("Your past runs").click()
    expect(page.locator("#history-table")).to_contain_text(runs[0].run_id)
    page.locator("#reopen-id input, #reopen-id textarea").first.fill(runs[0].run_id)
    page.locator("#reopen").click()
    page.locator("#trace").get_by_text("📊 Run summary").wait_for()
    assert "Step 1" in page.locator("#trace").inner_text()


def test_thumbs_down_with_the_right_answer_relabels_the_memory(app_server, new_page):
    url, ctx = app_server
    page = new_page()
    login(page, url, "alice", "alice-pass")
    trace = research(page)
    memory = ctx.runtime.store.list(namespace="alice", limit=1)[0]
    result = page.locator("#feedback-result")
    if "Verdict: correct" not in trace:  # make it a success first, so thumbs down must relabel it
        page.locator("#thumbs-up").click()
        result.get_by_text("relabelled as a successful strategy").wait_for()
        assert ctx.runtime.store.get(memory.id, namespace="alice").correct
    page.locator("#right-answer input, #right-answer textarea").first.fill("Arthur's Magazine")
    page.locator("#thumbs-down").click()
    result.get_by_text("relabelled as a failure lesson").wait_for()
    assert "Queued for test-time learning" in result.inner_text()
    assert ctx.runtime.store.get(memory.id, namespace="alice").correct is False
    assert ctx.queue.items("alice")[-1].right_answer == "Arthur's Magazine"

    page.get_by_role("tab", name="Learning").click()
    assert "Test-time learning is switched off" in result.inner_text() and "not running yet" not in result.inner_text()
    page.locator("#learning-status").get_by_text("Test-time learning is switched off").wait_for()
    page.locator("#queue-length").get_by_text("feedback items").wait_for()


def test_edit_a_memory_then_undo_it(app_server, new_page):
    url, ctx = app_server
    original = "Search each magazine, compare founding years."
    memory = add_memory(ctx, "alice", "When was Arthur's Magazine founded?", original)
    page = new_page()
    login(page, url, "alice", "alice-pass")
    open_memory_tab(page)
    page.locator("#memory-id input, #memory-id textarea").first.fill(memory.id)
    page.locator("#memory-open").click()
    summary = page.locator("#memory-summary textarea")
    page.wait_for_function("el => el.value.length > 0", arg=summary.element_handle())
    assert summary.input_value() == original
    summary.fill("Only look at the first search result.")
    page.locator("#memory-save").click()
    page.locator("#memory-action-result").get_by_text("Saved the edits").wait_for()
    assert ctx.runtime.store.get(memory.id, namespace="alice").summary == "Only look at the first search result."
    expect(page.locator("#memory-history")).to_contain_text("edit")
    page.locator("#memory-undo").click()
    page.locator("#memory-action-result").get_by_text("Undid change").wait_for()
    assert ctx.runtime.store.get(memory.id, namespace="alice").summary == original
    page.wait_for_function("el => el.value.startsWith('Search each')", arg=summary.element_handle())


def test_export_then_import_restores_a_deleted_memory(app_server, new_page, tmp_path):
    url, ctx = app_server
    memory = add_memory(ctx, "carol", "Who founded First for Women?")
    page = new_page()
    login(page, url, "carol", "carol-pass")
    open_memory_tab(page)
    exported = export_memories(page, tmp_path)
    assert exported.suffix == ".jsonl"
    assert memory.id in open(exported, encoding="utf-8").read()

    page.locator("#memory-id input, #memory-id textarea").first.fill(memory.id)
    page.locator("#memory-open").click()
    page.locator("#memory-detail-text").get_by_text("Who founded First for Women?").wait_for()
    page.locator("#memory-delete").click()
    page.locator("#memory-delete-yes").click()  # delete asks first
    page.locator("#memory-action-result").get_by_text("Deleted").wait_for()
    assert ctx.runtime.store.count(namespace="carol") == 0

    page.locator("#import-file input[type=file]").set_input_files(exported)
    page.locator("#import-preview-text").get_by_text("1 memories").wait_for()
    assert "Who founded First for Women?" in page.locator("#import-preview").inner_text()
    assert ctx.runtime.store.count(namespace="carol") == 0  # a preview changes nothing
    page.locator("#memory-import").click()
    page.locator("#import-result").get_by_text("Imported 1 memories").wait_for()
    assert ctx.runtime.store.get(memory.id, namespace="carol").question == "Who founded First for Women?"
    expect(page.locator("#memory-table")).to_contain_text("Who founded First for Women?")


def test_each_user_sees_only_their_own_memories(app_server, new_page):
    url, ctx = app_server
    add_memory(ctx, "alice", "alice-only: where do llamas live?")
    add_memory(ctx, "bob", "bob-only: how tall is a giraffe?")
    pages = {}
    for user in ("alice", "bob"):
        pages[user] = new_page()
        login(pages[user], url, user, f"{user}-pass")
        open_memory_tab(pages[user])
    alice_table = pages["alice"].locator("#memory-table").inner_text()
    bob_table = pages["bob"].locator("#memory-table").inner_text()
    assert "alice-only" in alice_table and "bob-only" not in alice_table
    assert "bob-only" in bob_table and "alice-only" not in bob_table
    assert not pages["bob"].locator("#namespace").is_visible()

    admin = new_page()
    login(admin, url, "admin", "admin-pass")
    open_memory_tab(admin)
    assert admin.locator("#namespace").is_visible()  # an admin can switch to any namespace


def test_wrong_password_is_refused(app_server, new_page):
    url, _ = app_server
    page = new_page()
    page.goto(url)
    page.locator("input[type=text]").fill("alice")
    page.locator("input[type=password]").fill("not-her-password")
    page.get_by_role("button", name="Login").click()
    page.get_by_text("Incorrect Credentials").wait_for()


def test_a_memory_link_from_the_trace_opens_that_memory(app_server, new_page):
    url, ctx = app_server
    memory = add_memory(ctx, "alice", "Where was First for Women published?")
    page = new_page()
    login(page, url, "alice", "alice-pass")
    page.goto(f"{url}/?memory={memory.id}")
    page.locator("#memory-detail-text").get_by_text("Where was First for Women published?").wait_for()
    assert page.locator("#memory-summary textarea").input_value() == memory.summary


def test_a_broken_image_gets_a_clear_message_and_the_app_keeps_serving(app_server, new_page, tmp_path):
    url, _ = app_server
    broken = tmp_path / "photo.png"
    broken.write_bytes(b"\x89PNG\r\n\x1a\n not really an image")
    page = new_page()
    login(page, url, "bob", "bob-pass")
    page.locator("#image input[type=file]").set_input_files(str(broken))
    question_box(page).fill("What is shown in this picture?")
    page.locator("#ask").click()
    page.locator("#trace").get_by_text("is not an image that can be read").wait_for()
    page.get_by_role("tab", name="Learning").click()  # still serving
    page.locator("#queue-length").get_by_text("feedback items").wait_for()


def test_the_read_only_demo_uses_memories_but_changes_none(read_only_server, new_page):
    url, ctx = read_only_server
    seed = add_memory(ctx, "default", QUESTION)
    page = new_page()
    page.goto(url)
    page.locator("#who").get_by_text("read-only demo").wait_for()
    trace = research(page)
    assert "1 successful, 0 failed" in trace and "Memory stored" in trace
    page.locator("#thumbs-down").click()
    page.locator("#feedback-result").get_by_text("read-only demo").wait_for()
    open_memory_tab(page)
    page.locator("#memory-id input, #memory-id textarea").first.fill(seed.id)
    page.locator("#memory-open").click()
    page.locator("#memory-detail-text").get_by_text("Win rate").wait_for()
    page.locator("#memory-delete").click()
    page.locator("#memory-action-result").get_by_text("read-only demo").wait_for()
    assert ctx.runtime.store.count(namespace="default") == 1
    assert ctx.runtime.store.get(seed.id, namespace="default").usage_count == seed.usage_count


def test_feedback_given_while_the_reports_are_written_stays_on_the_page(read_only_server, new_page, monkeypatch):
    """The answer shows before the reports are written; a thumbs given in between is not wiped when
    the run's last update (the reports) arrives."""
    import app.research_runs as research_runs

    url, _ = read_only_server
    written, feedback_shown = research_runs.report_downloads, threading.Event()

    def reports_after_the_feedback(*args, **kwargs):
        assert feedback_shown.wait(timeout=120), "the test never gave its feedback"
        return written(*args, **kwargs)

    monkeypatch.setattr(research_runs, "report_downloads", reports_after_the_feedback)
    page = new_page()
    page.goto(url)
    research(page)
    page.locator("#thumbs-down").click()
    page.locator("#feedback-result").get_by_text("read-only demo").wait_for()
    feedback_shown.set()
    page.get_by_role("button", name="⬇ Report (Markdown)").wait_for()
    expect(page.locator("#feedback-result")).to_contain_text("read-only demo")


class HeldModel:
    """The real tiny model whose every call waits until the test sets `released`: a run that lasts as
    long as the test needs, without a big model."""

    def __init__(self, model, released: threading.Event) -> None:
        self._model, self._released = model, released
        self.name, self.supports_images = model.name, model.supports_images

    def __getattr__(self, name):
        return getattr(self._model, name)

    def _wait_for_release(self) -> None:
        assert self._released.wait(timeout=120), "the test never released the held model"

    def stream(self, *args, **kwargs):
        self._wait_for_release()
        yield from self._model.stream(*args, **kwargs)

    def generate(self, *args, **kwargs):
        self._wait_for_release()
        return self._model.generate(*args, **kwargs)

    def choose(self, *args, **kwargs):
        self._wait_for_release()
        return self._model.choose(*args, **kwargs)


@pytest.mark.timeout(600)  # its own bounds: 120 s for the held run, 120 s for its summary
def test_a_long_run_does_not_block_another_users_page(read_only_server, new_page):
    url, ctx = read_only_server
    models = ctx.runtime.agent.models
    released = threading.Event()
    models["executor"] = HeldModel(models["executor"], released)
    try:
        busy, other = new_page(), new_page()
        busy.goto(url)
        question_box(busy).fill(QUESTION)
        busy.locator("#ask").click()
        busy.locator("#trace").get_by_text("🗺️ Plan").first.wait_for()  # the run is under way, its Executor held
        other.goto(url)
        open_memory_tab(other)
        other.get_by_role("tab", name="Learning").click()
        other.locator("#queue-length").get_by_text("feedback items").wait_for()
        assert "📊 Run summary" not in busy.locator("#trace").inner_text()  # still running meanwhile
    finally:
        released.set()
    busy.locator("#trace").get_by_text("📊 Run summary").wait_for(timeout=120_000)


@pytest.mark.timeout(600)  # starts an app that learns; its own bound is 240 s for a new version
def test_feedback_teaches_the_planner_in_the_background(learning_server, new_page):
    """Learning on (one signal per update): thumbs down with the right answer -> a new Planner version."""
    import time

    url, ctx = learning_server
    page = new_page()
    page.goto(url)
    page.locator("#who").get_by_text("Local mode").wait_for()
    research(page)
    page.locator("#right-answer input, #right-answer textarea").first.fill("Arthur's Magazine")
    page.locator("#thumbs-down").click()
    result = page.locator("#feedback-result")
    result.get_by_text("Test-time learning is on:").wait_for()
    assert "not running yet" not in result.inner_text()

    page.get_by_role("tab", name="Learning").click()
    status = page.locator("#learning-status")
    status.get_by_text("Test-time learning is on.").wait_for()
    versions = page.locator("#versions-table")
    deadline = time.monotonic() + 240
    while "v0001" not in versions.inner_text() and time.monotonic() < deadline:
        page.wait_for_timeout(2_000)
        page.locator("#refresh-learning").click()
    expect(versions).to_contain_text("v0001")
    expect(page.locator("#signals-table")).to_contain_text("Arthur's Magazine or First for Women")
    expect(page.locator("#queue-length")).to_contain_text("learner has taken everything queued")

    page.locator("#learning-pause").click()
    status.get_by_text("Test-time learning is paused").wait_for()
    assert ctx.learner.status().paused
    page.locator("#learning-resume").click()
    status.get_by_text("Test-time learning is on.").wait_for()
    assert not ctx.learner.status().paused


def test_the_page_reads_answer_then_trace_then_feedback_opens_document_passages_and_shows_the_drop_zone(
        start_app, new_page, tmp_path, embedder, shared_tools):
    from backend.documents import DocumentStore
    from backend.tools.search import WikiSearchTool
    from tests.app.conftest import ARTIFACTS
    from tests.app.test_documents_research import QUESTION as PDF_QUESTION, ReactorModel, make_pdf

    models = {role: ReactorModel(role) for role in ("planner", "executor", "judge", "manager")}
    url, ctx = start_app(with_logins=True, models=models,
                         agent={"max_turns": 4, "sparse_memory_planner": "planner", "guided_actions": "off"})
    ctx.runtime.documents = documents = DocumentStore(tmp_path / "documents", embedder=embedder)
    ctx.runtime.agent.tools["search"] = WikiSearchTool(shared_tools["search"].index, documents)
    make_pdf(tmp_path / "stations.pdf")
    documents.add_paths("alice", "survey", [tmp_path / "stations.pdf"])
    page = new_page()
    login(page, url, "alice")

    # The image drop zone shows all of itself: nothing inside it is cut off.
    zone = page.locator("#image")
    assert zone.evaluate("e => e.scrollHeight <= e.clientHeight + 1")
    inside, outside = zone.bounding_box(), zone.get_by_text("Click to Upload").bounding_box()
    assert outside["y"] + outside["height"] <= inside["y"] + inside["height"]

    ask_until_final(page, PDF_QUESTION)
    # The answer first, then the trace, then the feedback.
    tops = [page.locator(f"#{name}").bounding_box()["y"] for name in ("answer-box", "trace", "feedback")]
    assert tops == sorted(tops)

    # A document source opens its passage (file, page, text) from alice's own documents.
    source = page.locator("#source-view").first  # Gradio gives a group's id to two nested elements
    expect(source).to_be_hidden()
    page.locator("#answer-box button.cite").first.click()
    page.locator("#answer-box details.citation button.doc-open").first.click()
    expect(source).to_be_visible()
    expect(page.locator("#source-text")).to_contain_text("document stations.pdf (collection survey), page 2")
    expect(page.locator("#source-text")).to_contain_text("The Quillmoor reactor opened in 1987")
    expect(page.locator("#source-file").get_by_role("cell", name="stations.pdf")).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "research-page.png"), full_page=True)
