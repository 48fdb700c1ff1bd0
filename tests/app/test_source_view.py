"""A cited sentence in its source (app/source_view.py): a wiki passage as text with the sentence
highlighted and escaped; a page of the caller's own PDF rendered with the sentence marked, its text
beside it; another user's document never opens; what a strike of each needs."""

from __future__ import annotations

import pytest

from app.render_html import transcript_of
from app.session import AppContext
from app.source_view import highlighted_html, open_citation, page_images
from backend.events import AnswerReady, MemoryStored, RunFinished, RunStarted, ToolReturned
from backend.tools.struck import passage_key
from tests.app.test_report import SCRIPT, passage
from tests.backend.documents.test_page_image import LONG, two_page_pdf

QUESTION = "When did the Quillmoor reactor open?"


def run(namespace: str, passages: list[dict], citation: dict) -> list:
    return [RunStarted("r1", question=QUESTION, namespace=namespace),
            ToolReturned("r1", turn=1, name="search", ok=True, content="...", passages=passages),
            AnswerReady("r1", text="1987", sources=[{"n": 1, **citation}]),
            MemoryStored("r1", memory_id="7b0a9e0e-0d3c-4a55-9d3e-2f4bb1f6b0a1", summary="s", correct=True,
                         question_type="time", summary_source="model"),
            RunFinished("r1", answer="1987", stats={})]


@pytest.fixture
def ctx(runtime):
    return AppContext(runtime)


def test_the_sentence_is_highlighted_in_escaped_text():
    marked, found = highlighted_html(f"Before {SCRIPT}. The reactor opened in 1987. After.", "The reactor opened in 1987.")
    assert found and '<mark class="cited-sentence">The reactor opened in 1987.</mark>' in marked
    assert "<script>" not in marked and "&lt;script&gt;" in marked
    assert highlighted_html("Nothing here.", "The reactor opened.") == ("Nothing here.", False)


def test_a_wiki_citation_opens_as_text_with_its_sentence_highlighted_and_can_be_struck(ctx):
    text = f"The Quillmoor reactor is a fictional plant {SCRIPT}. It opened in 1987 on the coast."
    transcript = transcript_of(run("default", [passage("Quillmoor reactor", text)], {
        "title": "Quillmoor reactor", "url": None, "source": "wiki:hotpotqa", "sentence": "It opened in 1987 on the coast."}))
    view = open_citation(ctx, "default", "default", transcript, 1)
    assert '<mark class="cited-sentence">It opened in 1987 on the coast.</mark>' in view.html
    assert "<script>" not in view.html and "wiki (hotpotqa)" in view.html and view.file is None
    assert view.opened == {"key": "wiki:hotpotqa|Quillmoor reactor", "title": "Quillmoor reactor",
                           "source": "wiki:hotpotqa", "url": None, "sentence": "It opened in 1987 on the coast.",
                           "run_id": "r1", "memory_id": "7b0a9e0e-0d3c-4a55-9d3e-2f4bb1f6b0a1",
                           "question": QUESTION, "n": 1}
    assert "has no source [2]" in open_citation(ctx, "default", "default", transcript, 2).html


def test_a_pdf_citation_opens_its_page_with_the_sentence_marked_for_its_owner_alone(ctx, runtime, tmp_path, embedder):
    from backend.documents import DocumentStore

    runtime.documents = store = DocumentStore(tmp_path / "documents", embedder=embedder)
    store.add_paths("alice", "survey", [two_page_pdf(tmp_path / "stations.pdf")])
    found = store.search("alice", ["Quillmoor reactor opened"], k=1)[0][0][0]
    retrieved = {"title": found.title, "text": found.text, "source": found.source, "score": 1.0, "url": found.url}
    citation = {"title": found.title, "url": found.url, "source": found.source, "sentence": LONG}
    transcript = transcript_of(run("alice", [retrieved], citation))

    view = open_citation(ctx, "alice", "alice", transcript, 1)
    assert found.url == "doc://survey/stations.pdf#page=2"
    assert '<figure class="source-page marked" data-page="2">' in view.html
    assert 'src="data:image/png;base64,' in view.html and "the cited sentence is marked" in view.html
    assert f'<mark class="cited-sentence">{LONG}</mark>' in view.html  # and in the page's text beside it
    assert view.file is not None and ctx.files.may_read(view.file, "alice") and not ctx.files.may_read(view.file, "bob")
    assert view.opened["key"] == passage_key(retrieved) and view.opened["key"].startswith(found.url + "|")
    assert set(page_images(ctx, "alice", [transcript.events])) == {1}  # the PDF report shows the same marked page

    other = open_citation(ctx, "bob", "bob", transcript, 1)  # alice's run's locator, asked for in bob's namespace
    assert other.file is None and "data:image/png" not in other.html and "yours to read" in other.html
    assert page_images(ctx, "bob", [transcript.events]) == {}
