"""The analyst steers the research, in headless Chromium against the whole app (logins on, canned
models): a citation opens its source beside the answer with the cited sentence highlighted (a wiki
passage as text; a page of the analyst's PDF as an image with the sentence marked); "this is wrong"
strikes a source, the re-answer goes without it, another user still gets it, undo brings it back; a
memory struck from the Memory view is not retrieved until undone; the downloaded report opens with
the brief, every claim cited, in Markdown and PDF."""

from __future__ import annotations

import re
import time

import pypdfium2 as pdfium
import pytest
from playwright.sync_api import expect

from memory_db import NewMemory
from tests.app.conftest import ARTIFACTS, ask_until_final, login
from tests.app.test_documents_research import QUESTION as PDF_QUESTION, ReactorModel, make_pdf
from tests.app.test_research_page import QUESTION, CannedModel

pytestmark = pytest.mark.browser

STATED = "The Quillmoor reactor opened in 1987 after a decade of construction."


def serve(start_app, shared_tools, embedder, tmp_path, model):
    from backend.documents import DocumentStore
    from backend.tools.search import WikiSearchTool

    models = {role: model(role) for role in ("planner", "executor", "judge", "manager")}
    url, ctx = start_app(with_logins=True, models=models,
                         agent={"max_turns": 4, "sparse_memory_planner": "planner", "guided_actions": "off"})
    ctx.runtime.documents = DocumentStore(tmp_path / "documents", embedder=embedder)
    # as build_runtime wires it: each namespace's search leaves out the passages struck there
    ctx.runtime.agent.tools["search"] = WikiSearchTool(shared_tools["search"].index, ctx.runtime.documents,
                                                       struck=ctx.runtime.store.struck_keys)
    return url, ctx


def cited_titles(page) -> list[str]:
    return [re.sub(r"^\[\d+\]\s*", "", s).split(" · ")[0]
            for s in page.locator("#answer-box details.citation summary").all_inner_texts()]


def open_source(page, n: int = 1) -> float:
    """Click citation [n]; seconds until its source shows beside the answer."""
    started = time.monotonic()
    page.locator("#answer-box button.cite").nth(n - 1).click()
    page.locator(f'#source-text .source-panel[data-cite="{n}"]').wait_for()
    return time.monotonic() - started


def reanswer(page) -> None:
    page.locator("#reanswer").click()
    page.locator('#answer-box .answer-box[data-state="working"]').wait_for()
    page.locator('#answer-box .answer-box[data-state="final"]').wait_for(timeout=60_000)


def test_a_struck_wiki_source_leaves_the_next_answer_and_comes_back_after_undo(
        start_app, new_page, tmp_path, embedder, shared_tools):
    url, ctx = serve(start_app, shared_tools, embedder, tmp_path, CannedModel)
    page = new_page()
    login(page, url, "alice")
    ask_until_final(page, QUESTION)
    assert cited_titles(page)[0] == "Arthur's Magazine"

    seconds = open_source(page, 1)
    print(f"\nwiki passage opened beside the answer in {seconds:.2f} s (click to shown, this machine)")
    panel = page.locator("#source-text")
    expect(panel).to_contain_text("Arthur's Magazine")
    expect(panel.locator("mark.cited-sentence")).to_have_count(1)
    assert panel.locator("mark.cited-sentence").inner_text() in panel.locator(".source-text").inner_text()
    box, side = page.locator("#answer-box").bounding_box(), page.locator("#source-view").first.bounding_box()
    assert side["x"] >= box["x"] + box["width"] - 1 and side["y"] < box["y"] + box["height"], "beside the answer"

    page.locator("#strike-source").click()
    expect(page.locator("#strike-result")).to_contain_text("Struck: Arthur's Magazine is no longer retrieved")
    [key] = ctx.runtime.store.struck_keys("alice")
    assert key.endswith("|Arthur's Magazine") and ctx.runtime.store.struck_keys("bob") == frozenset()
    first_run = ctx.runtime.runlog.load("alice", ctx.runtime.runlog.list_runs("alice")[0].run_id)
    reanswer(page)
    assert "Arthur's Magazine" not in cited_titles(page), "the struck article is not used again"

    other = new_page()  # another namespace still gets it
    login(other, url, "bob")
    ask_until_final(other, QUESTION)
    assert cited_titles(other)[0] == "Arthur's Magazine"

    # The Memory view lists it, and the first run's memory has the strike in its history.
    page.get_by_role("tab", name="Memory").click()
    page.locator("#struck-sources").get_by_text("Struck sources").click()
    expect(page.locator("#struck-table")).to_contain_text("Arthur's Magazine")
    first_memory = next(e.memory_id for e in first_run if e.kind == "memory_stored")
    assert "strike" in [e.action for e in ctx.runtime.store.history(first_memory, namespace="alice")]

    page.get_by_role("tab", name="Research").click()
    page.locator("#unstrike-source").click()
    expect(page.locator("#strike-result")).to_contain_text("Undone: Arthur's Magazine is retrieved again")
    assert ctx.runtime.store.struck_keys("alice") == frozenset()
    reanswer(page)
    assert cited_titles(page)[0] == "Arthur's Magazine"


def test_a_pdf_citation_opens_its_page_marked_a_strike_and_undo_and_the_report_reads_as_a_brief(
        start_app, new_page, tmp_path, embedder, shared_tools):
    url, ctx = serve(start_app, shared_tools, embedder, tmp_path, ReactorModel)
    make_pdf(tmp_path / "stations.pdf")
    ctx.runtime.documents.add_paths("alice", "survey", [tmp_path / "stations.pdf"])
    page = new_page()
    login(page, url, "alice")
    ask_until_final(page, PDF_QUESTION)
    expect(page.locator("#answer-box .answer-text")).to_contain_text("1987")

    seconds = open_source(page, 1)
    page.locator("#source-text figure.source-page.marked img.page-image").wait_for()
    seconds_to_image = seconds  # the page image comes in the same update as the panel
    print(f"\nPDF page opened, its sentence marked, in {seconds_to_image:.2f} s (click to shown, this machine)")
    panel = page.locator("#source-text")
    expect(panel).to_contain_text("document stations.pdf (collection survey), page 2")
    expect(panel.locator("figcaption")).to_contain_text("Page 2 of 2: the cited sentence is marked.")
    expect(panel.locator(".source-text mark.cited-sentence")).to_contain_text("The Quillmoor reactor opened in 1987")
    assert panel.locator("img.page-image").evaluate("img => img.complete && img.naturalWidth") == 900
    expect(page.locator("#source-file").get_by_role("cell", name="stations.pdf")).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "cited-pdf-page.png"))

    # The report: the brief first, each claim linked to its source; the run log in an appendix.
    with page.expect_download() as download:
        page.locator("#download-report").click()
    report = (tmp_path / download.value.suggested_filename)
    download.value.save_as(report)
    text = report.read_text(encoding="utf-8")
    header, _, rest = text.partition("\n## ")
    assert rest.startswith("Brief\n") and "# Appendix: the run log" in rest
    brief = rest.split("# Appendix: the run log")[0]
    assert "**The answer.** The answer about Quillmoor is 1987 [[1]](#source-1)." in brief
    found = brief.split("**How it was found.**")[1].split("**What stays unverified.**")[0].strip().splitlines()
    assert found and all(re.search(r"\[\[\d+\]\]\(#source-\d+\)$", line) for line in found)
    assert '<a id="source-1"></a>**[1] stations.pdf p. 2**' in brief and f"**{STATED}**" in brief
    with page.expect_download() as download:
        page.locator("#download-pdf").click()
    pdf = pdfium.PdfDocument(download.value.path())
    try:
        first = " ".join(pdf[0].get_textpage().get_text_range().split())
        assert first.index("Brief") < first.index("The answer about Quillmoor is 1987 [1].")
        images = [o for i in range(len(pdf)) for o in pdf[i].get_objects() if o.type == pdfium.raw.FPDF_PAGEOBJ_IMAGE]
        assert images, "the cited page, its sentence marked, is in the PDF report"
    finally:
        pdf.close()

    # Strike the page's passage: the re-answer cannot find the year; undo brings it back.
    page.locator("#strike-source").click()
    expect(page.locator("#strike-result")).to_contain_text("Struck: stations.pdf p. 2")
    reanswer(page)
    expect(page.locator("#answer-box .answer-text")).to_contain_text("unknown")
    assert "stations.pdf p. 2" not in cited_titles(page)
    page.locator("#unstrike-source").click()
    expect(page.locator("#strike-result")).to_contain_text("retrieved again")
    reanswer(page)
    expect(page.locator("#answer-box .answer-text")).to_contain_text("1987")


def test_a_memory_struck_in_the_memory_view_is_not_retrieved_until_undone(start_app, new_page, tmp_path, embedder,
                                                                          shared_tools):
    url, ctx = serve(start_app, shared_tools, embedder, tmp_path, CannedModel)
    store = ctx.runtime.store
    memory = store.add(NewMemory(question=QUESTION, summary="Search each magazine, compare founding years.",
                                 plan="1. search", correct=True, namespace="alice",
                                 provenance={"verified": True, "verdict_source": "person"}))

    def retrieved() -> bool:
        found = store.search_contrastive(QUESTION, namespace="alice", k=3)
        return memory.id in {s.memory.id for s in found.successful + found.failed}

    assert retrieved()
    page = new_page()
    login(page, url, "alice")
    page.get_by_role("tab", name="Memory").click()
    page.locator("#memory-id input, #memory-id textarea").first.fill(memory.id)
    page.locator("#memory-open").click()
    expect(page.locator("#memory-detail-text")).to_contain_text(QUESTION)
    page.locator("#memory-strike").click()
    expect(page.locator("#memory-action-result")).to_contain_text("Struck")
    expect(page.locator("#memory-detail-text")).to_contain_text("Struck as wrong")
    expect(page.locator("#memory-history")).to_contain_text("strike")
    assert not retrieved()

    page.locator("#struck-sources").get_by_text("Struck sources").click()
    expect(page.locator("#struck-table")).to_contain_text("memory")
    page.locator("#struck-table").get_by_text(QUESTION).filter(visible=True).first.click()
    expect(page.locator("#struck-selected")).to_contain_text("Selected for undo")
    page.locator("#struck-undo").click()
    expect(page.locator("#memory-action-result")).to_contain_text("retrieved again")
    expect(page.locator("#memory-history")).to_contain_text("unstrike")
    assert retrieved()
