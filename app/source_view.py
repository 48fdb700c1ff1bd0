"""A cited sentence in its source, as the research page shows it beside the answer: a wiki passage,
a web page or an image's text as text; a passage of the person's own documents as the page it came
from (a PDF page rendered as an image with the sentence's boxes marked: backend.documents.page_image)
and that page's text. The sentence is highlighted in the text either way. Everything shown is data:
escaped, never obeyed. A document is read from the caller's own namespace (or the shared
collections), never from one the page names.

`opened`, the citation's facts a strike needs (its key, title, source, the run and its memory), is
kept in the page's server-side state; the page never supplies a key.
"""

from __future__ import annotations

import base64
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from app.escaping import escape_html
from app.report import cited_passage, document_place, source_label, web_link
from app.session import AppContext
from app.transcript import RunTranscript
from backend.documents.errors import DocumentError
from backend.documents.page_image import PageImage, render_page
from backend.documents.parsing import file_format
from backend.events import Event
from backend.tools.sentence_span import sentence_span
from backend.tools.struck import passage_key

log = logging.getLogger(__name__)

STRIKEABLE_SOURCES = ("wiki:", "doc:", "web", "page")  # an image's own text is the person's, not a source to strike
NOT_FOUND = "The cited sentence is not in this text word for word; the passage is shown as retrieved."
MAX_PAGE_PASSAGES = 20


@dataclass
class SourceView:
    html: str
    file: str | None = None  # the document, copied for the caller alone
    opened: dict = field(default_factory=dict)  # what a strike needs; {} when this source cannot be struck
    seconds: float = 0.0  # how long opening it took (rendering a page included)


def highlighted_html(text: str, sentence: str | None) -> tuple[str, bool]:
    """`text` escaped, with `sentence` in a <mark class="cited-sentence"> where the text holds it."""
    span = sentence_span(text, sentence or "") if sentence else None
    if span is None:
        return escape_html(text), False
    start, end = span
    return (f'{escape_html(text[:start])}<mark class="cited-sentence">{escape_html(text[start:end])}</mark>'
            f'{escape_html(text[end:])}'), True


def strikeable(source: str | None) -> bool:
    return str(source or "").startswith(STRIKEABLE_SOURCES)


def _head(n: object, title: str, where: str) -> str:
    number = f'<span class="cite-n">[{escape_html(n)}]</span> ' if n is not None else ""
    return (f'<div class="source-head">{number}<b>{escape_html(title or "(untitled)")}</b>'
            f'<span class="muted"> · {escape_html(where)}</span></div>')


def _sentence_line(sentence: str | None) -> str:
    if not sentence:
        return ""
    return f'<p class="source-sentence">Cited: “{escape_html(sentence)}”</p>'


def open_citation(ctx: AppContext, namespace: str, user: str, transcript: RunTranscript, n: int) -> SourceView:
    """Citation `n` of the run's latest answer, opened beside the answer with its sentence highlighted."""
    started = time.perf_counter()
    latest = transcript.answers[-1] if transcript.answers else None
    citation = next((c for i, c in enumerate(latest.sources, 1) if c.get("n", i) == n), None) if latest else None
    if citation is None:
        return SourceView(f'<p class="source-missing">⚠️ The answer shown has no source [{escape_html(n)}]; '
                          "ask again or reopen the run from your past runs.</p>")
    passage = cited_passage(citation, transcript.passages)
    sentence = citation.get("sentence")
    title = citation.get("title") or ""
    parts = [_head(n, title, source_label(citation)), _sentence_line(sentence)]
    file = None
    if document_place(citation.get("url")) is not None:
        body, file = document_html(ctx, namespace, user, citation["url"], sentence, passage)
        parts.append(body)
    else:
        link = web_link(citation.get("url"))
        if link:
            parts.append(f'<p class="passage-meta"><a href="{escape_html(link)}" target="_blank" '
                         f'rel="noopener noreferrer">{escape_html(link)}</a></p>')
        parts.append(_text_html(passage.get("text") if passage else None, sentence))
    opened = {}
    if passage is not None and strikeable(citation.get("source")) and transcript.started is not None:
        opened = {"key": passage_key(passage), "title": title, "source": str(citation.get("source") or ""),
                  "url": citation.get("url"), "sentence": sentence, "run_id": transcript.run_id,
                  "memory_id": transcript.memory_id, "question": transcript.started.question, "n": n}
    html = f'<div class="source-panel" data-cite="{escape_html(n)}">{"".join(parts)}</div>'
    return SourceView(html, file, opened, time.perf_counter() - started)


def open_locator(ctx: AppContext, namespace: str, user: str, locator: str) -> SourceView:
    """A document passage a trace line points at (its doc:// locator): its page, without a sentence."""
    started = time.perf_counter()
    if document_place(locator) is None:
        return SourceView('<p class="source-missing">⚠️ That is not a document passage\'s locator '
                          '(doc://&lt;collection&gt;/&lt;file&gt;#page=N).</p>')
    body, file = document_html(ctx, namespace, user, locator, None, None)
    html = (f'<div class="source-panel">{_head(None, document_place(locator).file, source_label({"url": locator}))}'
            f'{body}</div>')
    return SourceView(html, file, {}, time.perf_counter() - started)


def _text_html(text: str | None, sentence: str | None) -> str:
    if not text:
        return '<p class="source-missing">The passage\'s text is not in this run\'s events.</p>'
    marked, found = highlighted_html(text, sentence)
    note = "" if found or not sentence else f'<p class="muted">{escape_html(NOT_FOUND)}</p>'
    return f'{note}<div class="source-text passage-text">{marked}</div>'


def document_html(ctx: AppContext, namespace: str, user: str, locator: str, sentence: str | None,
                  passage: dict | None) -> tuple[str, str | None]:
    """A document passage's place: a PDF page as an image with the sentence marked, and the text of
    the passages at that place with the sentence highlighted; (html, the file copied for `user`)."""
    store = getattr(ctx.runtime, "documents", None)
    if store is None:
        return '<p class="source-missing">⚠️ Documents are not available in this app.</p>', None
    place = document_place(locator)
    try:
        path, name = store.source(namespace, locator)
        passages = store.passages_at(namespace, locator)
        folder = ctx.files.new_folder(user)
        copy = folder / Path(name).name
        shutil.copyfile(path, copy)
        ctx.files.grant(copy, user)  # served to this user alone
    except (DocumentError, OSError) as exc:
        text = passage.get("text") if passage else None
        note = f'<p class="source-missing">⚠️ {escape_html(exc)}</p>'
        return note + (_text_html(text, sentence) if text else ""), None
    parts = []
    if place.page is not None and file_format(name) == "pdf":
        parts.append(_page_figure(ctx, path, place.page, sentence, name))
    texts = [p.text for p in passages[:MAX_PAGE_PASSAGES]]
    if passage and passage.get("text") and all(" ".join(passage["text"].split()) != " ".join(t.split()) for t in texts):
        texts.insert(0, passage["text"])  # the file was re-indexed since: the passage as the run retrieved it
    where = f"page {place.page}" if place.page is not None else "this place"
    parts.append(f'<div class="source-text-label muted">The text of {escape_html(where)}:</div>')
    parts.append(_text_html("\n\n".join(texts), sentence))
    return "".join(parts), str(copy)


def _page_figure(ctx: AppContext, path: Path, page: int, sentence: str | None, name: str) -> str:
    try:
        image = render_page(path, page, sentence, ctx.runtime.config.documents)
    except DocumentError as exc:
        log.warning("page %s of %s was not rendered: %s", page, name, exc)
        return f'<p class="source-missing">⚠️ {escape_html(exc)}</p>'
    return page_figure_html(image, name, sentence)


def page_figure_html(image: PageImage, name: str, sentence: str | None) -> str:
    if image.found:
        caption = f"Page {image.page} of {image.pages}: the cited sentence is marked."
    elif sentence:
        caption = (f"Page {image.page} of {image.pages}: the page's text layer does not hold the sentence "
                   "(a scanned page, read by OCR); it is highlighted in the page's text below.")
    else:
        caption = f"Page {image.page} of {image.pages}."
    data = base64.b64encode(image.png).decode("ascii")
    marked = "marked" if image.found else "unmarked"
    return (f'<figure class="source-page {marked}" data-page="{image.page}">'
            f'<img class="page-image" src="data:image/png;base64,{data}" width="{image.width}" '
            f'height="{image.height}" alt="{escape_html(f"Page {image.page} of {name}")}">'
            f'<figcaption class="muted">{escape_html(caption)}</figcaption></figure>')


def page_images(ctx: AppContext, namespace: str, runs: Sequence[Sequence[Event]]) -> dict[int, PageImage]:
    """For the PDF report of a thread's `runs` (its first question's run, then each follow-up's): by the
    brief's source number, each cited page of the caller's own PDFs, rendered with its sentence marked
    (a page that cannot be read is left out)."""
    from app.brief import compose_brief

    store = getattr(ctx.runtime, "documents", None)
    if store is None or not runs:
        return {}
    images = {}
    for source in compose_brief(runs).sources:
        place = document_place(source.url)
        if place is None or place.page is None or file_format(place.file) != "pdf":
            continue
        try:
            path, _ = store.source(namespace, source.url)
            images[source.n] = render_page(path, place.page, source.sentence, ctx.runtime.config.documents)
        except (DocumentError, OSError) as exc:
            log.warning("page %s of %s is left out of the report: %s", place.page, place.file, exc)
    return images


SOURCE_CSS = """
.source-panel { border: 2px solid var(--border-color-primary); border-radius: 10px; padding: 10px 14px; max-height: 80vh; overflow-y: auto; }
.source-head { font-size: 1.05em; overflow-wrap: anywhere; }
.source-sentence { margin: 6px 0; font-style: italic; overflow-wrap: anywhere; }
.source-text { white-space: pre-wrap; overflow-wrap: anywhere; margin-top: 4px; }
mark.cited-sentence { background: #ffe26a; color: #222; padding: 0 1px; border-radius: 2px; }
.source-page { margin: 8px 0; }
.source-page img { width: 100%; height: auto; border: 1px solid var(--border-color-primary); }
.source-page.unmarked img { outline: 3px solid #e67800; }
.source-missing { color: #c98a12; }
.muted { color: var(--body-text-color-subdued); font-size: 0.9em; }
.cite-n { font-weight: 600; }
"""
