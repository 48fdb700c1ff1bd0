"""An analyst's own documents end to end in headless Chromium: upload a PDF and a Markdown file,
ask a question only the PDF answers, see the citation to its page, open it, download the report."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from backend.llm.base import Choice, Completion, ModelTraits
from tests.app.conftest import ask_until_final, login

pytestmark = pytest.mark.browser

QUESTION = "In which year did the Quillmoor reactor open?"


class ReactorModel:
    """Plans one search, searches the reactor, answers with the year the results give."""

    supports_images = False

    def __init__(self, role: str) -> None:
        self.role, self.name = role, f"canned:{role}"
        self.traits = ModelTraits(small=False, guided_turns=False, executor_turns=4)

    def generate(self, messages, *, max_new_tokens=256, stop=(), prefill="", temperature=0.0) -> Completion:
        if self.role == "executor":
            searched = any("<tool_call>" in m["content"] for m in messages if m["role"] == "assistant")
            if not searched:
                call = {"name": "search", "arguments": {"query_list": ["Quillmoor reactor opened"]}}
                text = f"<think>look it up</think><tool_call>{json.dumps(call)}</tool_call>"
            else:
                results = next(m["content"] for m in reversed(messages) if "<tool_response>" in m["content"])
                text = "<think>found it</think><answer>1987</answer>" if "1987" in results else "<answer>unknown</answer>"
        else:
            text = "1. Search for the Quillmoor reactor\n2. Find the year it opened"
        text = text[len(prefill):] if prefill and text.startswith(prefill) else text
        for s in stop:
            if s in text:
                text = text[: text.index(s)]
        return Completion(text=text, prompt_tokens=10, completion_tokens=len(text.split()), seconds=0.0, finish_reason="stop")

    def stream(self, messages, **kwargs):
        completion = self.generate(messages, **kwargs)
        yield completion.text
        yield completion

    def choose(self, messages, options, *, prefill="") -> Choice:
        label = "yes" if "yes" in options else options[0]
        return Choice(label=label, logprobs={o: (0.0 if o == label else -5.0) for o in options}, method="canned")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def make_pdf(path) -> None:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    pdf.add_page()
    pdf.multi_cell(0, 8, "Annual survey of northern power stations. This page lists no opening dates.")
    pdf.add_page()
    pdf.multi_cell(0, 8, "The Quillmoor reactor opened in 1987 after a decade of construction.")
    pdf.output(str(path))


def test_a_question_only_an_uploaded_pdf_answers_cites_its_page_and_goes_into_the_report(
        start_app, new_page, tmp_path, embedder, shared_tools):
    from backend.documents import DocumentStore
    from backend.tools.search import WikiSearchTool

    models = {role: ReactorModel(role) for role in ("planner", "executor", "judge", "manager")}
    url, ctx = start_app(with_logins=True, models=models,
                         agent={"max_turns": 4, "sparse_memory_planner": "planner", "guided_actions": "off"})
    documents = DocumentStore(tmp_path / "documents", embedder=embedder)
    ctx.runtime.documents = documents
    ctx.runtime.agent.tools["search"] = WikiSearchTool(shared_tools["search"].index, documents)
    make_pdf(tmp_path / "stations.pdf")
    (tmp_path / "notes.md").write_text("# Notes\n\nThe survey team met in Tulsa.\n", encoding="utf-8")

    page = new_page()
    login(page, url, "alice")
    page.get_by_role("tab", name="Documents").click()
    page.locator("#documents-files input[type=file]").set_input_files([str(tmp_path / "stations.pdf"), str(tmp_path / "notes.md")])
    page.locator("#documents-collection input, #documents-collection textarea").first.fill("survey")
    page.locator("#documents-add-button").click()
    expect(page.locator("#documents-result")).to_contain_text("Added 2 files to survey", timeout=60_000)

    page.get_by_role("tab", name="Research").click()
    ask_until_final(page, QUESTION)
    box = page.locator("#answer-box")
    expect(box.locator(".answer-text")).to_contain_text("1987")
    citation = box.locator("details.citation").first
    expect(citation.locator("summary")).to_contain_text("stations.pdf p. 2")  # the page that states it
    box.locator("button.cite").first.click()
    expect(citation).to_have_attribute("open", "")
    expect(citation.locator(".passage-text")).to_contain_text("The Quillmoor reactor opened in 1987")

    with page.expect_download() as download:
        page.locator("#download-report").click()
    report = tmp_path / download.value.suggested_filename
    download.value.save_as(report)
    text = report.read_text(encoding="utf-8")
    assert text.startswith(f"# Research report: {QUESTION}") and "**1987**" in text
    sources = text.split("## Sources")[1]
    assert "stations.pdf p. 2" in sources and "The Quillmoor reactor opened in 1987" in sources

    # Another user's research never reads alice's documents.
    other = new_page()
    login(other, url, "bob")
    ask_until_final(other, QUESTION)
    expect(other.locator("#answer-box .answer-text")).to_contain_text("unknown")
    expect(other.locator("#answer-box")).not_to_contain_text("stations.pdf")
