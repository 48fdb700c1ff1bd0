"""The answer, read at a glance, and one label for a run everywhere, in headless Chromium.

- An answer of another kind than the question asks for is shown as such, not as the answer.
- A passage that only shares the answer's number is not cited: it is listed as "also read"; the
  answer shows the cited sentence beside it.
- One run's label reads the same in the trace, the answer box, the report, History and the Memory
  view, after a thumbs up and after the right answer is set from the Memory view.
- The page: every element id once, the theme's fonts from the app itself, tables that break no word.

Canned models answer from a script per question: the Executor searches the script's queries, then
answers; a read of the answer (a prefilled reading request) gives the script's reading.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import expect

from backend.llm.base import Choice, Completion, ModelTraits
from backend.protocol import THINK_OPEN
from memory_db import NewMemory
from tests.app.conftest import login

pytestmark = pytest.mark.browser

DUES = "How many crowns per berth does the harbour of Vellmark charge each night?"
WHEN = "When was the director of the film Jaws born?"
SCRIPTS = {  # question -> (queries, answer, what a reading gives)
    DUES: (["harbour of Vellmark crowns per berth", "Nevada State Route 318"], "318", "318"),
    WHEN: (["Jaws film director"], "Cincinnati", "Cincinnati"),
}
DUES_NOTE = "# Harbour dues\n\nThe harbour of Vellmark charges 318 crowns per berth each night.\n"


class ScriptModel:
    supports_images = False

    def __init__(self, role: str) -> None:
        self.role, self.name = role, f"script:{role}"
        self.traits = ModelTraits(small=False, guided_turns=False, executor_turns=4)

    @staticmethod
    def _script(messages):
        asked = next(m["content"] for m in messages if m["role"] == "user")
        return next(script for question, script in SCRIPTS.items() if question in asked)

    def _text(self, messages, prefill: str) -> str:
        if self.role == "planner":
            return "1. Search for the answer"
        if self.role != "executor":
            return "Searched and answered."
        queries, answer, reading = self._script(messages)
        if prefill and not prefill.startswith(THINK_OPEN):  # a reading of the answer, after its prefilled opening
            return reading
        searched = sum("<tool_call>" in m["content"] for m in messages if m["role"] == "assistant")
        if searched < len(queries):
            call = {"name": "search", "arguments": {"query_list": [queries[searched]]}}
            return f"<think>look it up</think><tool_call>{json.dumps(call)}</tool_call>"
        return f"<think>found it</think><answer>{answer}</answer>"

    def generate(self, messages, *, max_new_tokens=256, stop=(), prefill="", temperature=0.0) -> Completion:
        text = self._text(messages, prefill)
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
        grading = next((m["content"] for m in messages if "Gold answer: " in m["content"]), None)
        if grading is not None:  # graded against a right answer: correct only when the answer states it
            gold, answer = (grading.split(f"{key}: ", 1)[1].split("\n", 1)[0] for key in ("Gold answer", "\nAnswer"))
            if answer == "N/A":  # the content-free answer the Judge calibrates with: no preference
                return Choice(label=options[0], logprobs={o: -1.0 for o in options}, method="script")
            label = "correct" if gold in answer else "incorrect"
        else:
            label = "yes" if "yes" in options else options[0]  # reflection: the answer stands; the Judge: unsure
        return Choice(label=label, logprobs={o: (0.0 if o == label else -5.0) for o in options}, method="script")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture(scope="module")
def script_server(start_app, tmp_path_factory, embedder, shared_tools):
    from backend.documents import DocumentStore
    from backend.tools.search import WikiSearchTool

    models = {role: ScriptModel(role) for role in ("planner", "executor", "judge", "manager")}
    url, ctx = start_app(with_logins=True, models=models,
                         agent={"max_turns": 4, "sparse_memory_planner": "planner", "guided_actions": "off",
                                "plan_shape": "steps", "read_by_quote": False})
    root = tmp_path_factory.mktemp("documents")
    notes = root / "notes"
    notes.mkdir()
    (notes / "dues.md").write_text(DUES_NOTE, encoding="utf-8")
    documents = DocumentStore(root / "store", embedder=embedder)
    documents.add_paths("alice", "harbour", [notes])
    ctx.runtime.documents = documents
    ctx.runtime.agent.tools["search"] = WikiSearchTool(shared_tools["search"].index, documents)
    return url, ctx


def ask(page, question: str) -> None:
    page.locator("#question textarea, #question input").first.fill(question)
    page.locator("#ask").click()
    page.locator('#answer-box .answer-box[data-state="final"]').wait_for(timeout=90_000)


def test_an_answer_of_another_kind_is_shown_as_such(script_server, new_page):
    url, _ = script_server
    page = new_page()
    login(page, url, "bob")
    ask(page, WHEN)
    text = page.locator("#answer-box .answer-text")
    expect(text).to_have_class("answer-text not-of-kind")
    expect(text).to_contain_text("found an answer, Cincinnati; not a date")
    expect(page.locator("#answer-box")).to_contain_text("No answer of the kind the question asks for was found")
    expect(page.locator("#answer-box .run-label")).to_have_text("not_attempted (the Judge's opinion, unverified)")
    expect(page.locator("#trace")).to_contain_text("the question asks for a date")


def downloaded_report(page, folder: Path) -> str:
    with page.expect_download() as download:
        page.locator("#download-report").click()
    path = folder / download.value.suggested_filename
    download.value.save_as(path)
    return path.read_text(encoding="utf-8")


def row_cells(page, table: str, first_cell: str) -> list[str]:
    """The texts of the cells of the shown row of `table` whose first cell is `first_cell`."""
    return page.evaluate("""([table, first]) => {
        const cells = [...document.querySelectorAll(`${table} td`)].filter((c) => c.offsetParent !== null);
        const row = cells.find((c) => c.textContent.trim() === first)?.closest('tr');
        return row ? [...row.querySelectorAll('td')].map((c) => c.textContent.trim()) : [];
    }""", [table, first_cell])


def labels_everywhere(page, ctx, run_id: str, folder: Path, expected: str) -> dict[str, str]:
    """The run's label as each view shows it: History, the reopened trace and answer box, the report, and
    the Memory view's table and detail (each table read once it has refreshed to hold `expected`)."""
    page.get_by_role("tab", name="Research").click()
    if not page.locator("#refresh-history").is_visible():  # the accordion opens once and stays open
        page.locator("#history").get_by_text("Your past runs").click()
    page.locator("#refresh-history").click()
    expect(page.locator("#history-table")).to_contain_text(expected)
    shown = {"history": row_cells(page, "#history-table", run_id)[-1]}
    page.locator("#reopen-id input, #reopen-id textarea").first.fill(run_id)
    page.locator("#reopen").click()
    page.locator("#feedback-result").get_by_text("Reopened run").wait_for()
    expect(page.locator("#trace details.verdict .run-label")).to_have_text(expected)  # the reopened run is shown
    shown["answer box"] = page.locator("#answer-box .run-label").inner_text().strip()
    shown["trace"] = page.locator("#trace details.verdict .run-label").inner_text().strip()
    report = downloaded_report(page, folder)
    verdict = re.search(r"\*\*Verdict:\*\* (.*?\))(?:, |$)", report, re.MULTILINE)
    shown["report"] = verdict.group(1) if verdict else ""
    stored = next(m for m in ctx.runtime.store.list(namespace="alice") if (m.provenance or {}).get("run_id") == run_id)
    page.get_by_role("tab", name="Memory").click()
    page.locator("#memory-search").click()
    expect(page.locator("#memory-table")).to_contain_text(expected)
    shown["memory table"] = row_cells(page, "#memory-table", stored.id)[3]  # id, question, answer, verdict
    page.locator("#memory-id input, #memory-id textarea").first.fill(stored.id)
    page.locator("#memory-open").click()
    detail = page.locator("#memory-detail-text")
    detail.get_by_text(stored.id).wait_for()
    expect(detail).to_contain_text(expected)  # opened again: the detail read once it is the memory as stored now
    label_line = detail.inner_text().split("Label:", 1)[1].split(" · ", 1)[0]  # "correct (you confirmed it): a ..."
    shown["memory detail"] = label_line.split("): ", 1)[0].strip() + ")"
    return shown


def test_a_padding_passage_is_not_cited_and_one_label_reads_the_same_in_every_view(script_server, new_page, tmp_path):
    url, ctx = script_server
    page = new_page()
    login(page, url, "alice")
    ask(page, DUES)
    box = page.locator("#answer-box")
    expect(box.locator(".answer-text")).to_contain_text("318 crowns")  # the span with its unit
    expect(box.locator(".answer-sentence")).to_contain_text("The harbour of Vellmark charges 318 crowns per berth")
    cited = box.locator("details.citation summary")
    expect(cited).to_have_count(1)
    expect(cited.first).to_contain_text("dues.md")
    expect(box.locator(".also-read")).to_contain_text("Nevada State Route 318")  # read, not cited
    [run] = ctx.runtime.runlog.list_runs("alice", limit=1)

    judged = "unsure (the Judge's opinion, unverified)"
    before = labels_everywhere(page, ctx, run.run_id, tmp_path, judged)
    assert set(before.values()) == {judged}, before

    page.get_by_role("tab", name="Research").click()
    page.locator("#thumbs-up").click()
    page.locator("#feedback-result").get_by_text("Feedback applied").wait_for()
    confirmed = labels_everywhere(page, ctx, run.run_id, tmp_path, "correct (you confirmed it)")
    assert set(confirmed.values()) == {"correct (you confirmed it)"}, confirmed

    # The right answer set from the Memory view goes the research page's way: the same label everywhere.
    page.locator("#memory-right-answer input, #memory-right-answer textarea").first.fill("412")
    page.locator("#memory-set-answer").click()
    page.locator("#memory-action-result").get_by_text("The right answer is set").wait_for()
    expect(page.locator("#memory-table")).to_contain_text("412 (yours)")  # the answer column
    corrected = labels_everywhere(page, ctx, run.run_id, tmp_path, "incorrect (you corrected it)")
    assert set(corrected.values()) == {"incorrect (you corrected it)"}, corrected


def test_the_page_has_unique_ids_its_own_fonts_and_tables_that_break_no_word(script_server, new_page):
    url, ctx = script_server
    ctx.runtime.store.add(NewMemory(question="Which magazine was started first, Arthur's Magazine or First for Women?",
                                    summary="Searched each magazine and compared the years.", plan="1. search",
                                    correct=True, namespace="carol"))
    page = new_page()
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    login(page, url, "carol")
    duplicates = {}
    for tab in ("Documents", "Learning", "Settings", "Research", "Memory"):  # each view's elements in the page
        page.get_by_role("tab", name=tab).click()
        page.locator(f"#tab-{tab.lower()}").wait_for()
        duplicates.update(page.evaluate("""() => {
            const seen = {};
            for (const el of document.querySelectorAll('[id]')) {
                if (el.id) (seen[el.id] = seen[el.id] || []).push(`${el.tagName.toLowerCase()}.${el.className}`);
            }
            return Object.fromEntries(Object.entries(seen).filter(([, found]) => found.length > 1));
        }"""))
    page.locator("#memory-count").get_by_text("memories in namespace").wait_for()
    faces = page.evaluate("""async () => {
        await document.fonts.ready;
        await document.fonts.load('700 32px "Source Sans Pro"', 'A');
        return [...document.fonts].filter((f) => f.status === 'loaded').map((f) => `${f.family} ${f.weight}`);
    }""")
    assert any("Source Sans Pro" in face and "700" in face for face in faces), faces
    heading = page.evaluate("getComputedStyle(document.querySelector('h1')).fontFamily")
    assert heading.startswith('"Source Sans Pro"') or heading.startswith("'Source Sans Pro'"), heading
    assert not any("SemiBold" in r for r in requests)  # Gradio's semibold file holds 55 glyphs: never used
    assert all(r.startswith(url) or r.startswith("data:") or r.startswith("blob:") for r in requests), \
        [r for r in requests if not r.startswith(url)][:5]
    cell = page.locator("#memory-table").get_by_text("Arthur's Magazine").filter(visible=True).first
    cell.click()  # a clicked cell is shown whole, where Gradio breaks words anywhere
    styles = page.evaluate("""() => [...document.querySelectorAll('#memory-table :is(td, th), #memory-table :is(td, th) *')]
        .filter((cell) => cell.offsetParent !== null)
        .map((cell) => `${getComputedStyle(cell).wordBreak} ${getComputedStyle(cell).overflowWrap}`)""")
    assert styles and set(styles) == {"normal normal"}, set(styles)
    assert duplicates == {}
