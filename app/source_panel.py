"""The source column of the research page, beside the answer: a cited source opens there with its
cited sentence highlighted (app/source_view.py reads it), and can be struck as wrong, the strike
undone, and the question re-answered without it."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gradio as gr

from app.escaping import escape_markdown
from app.question_run import ShownRuns, session_of
from app.run_history import logged_transcript
from app.session import AppContext, ReadOnlyModeError
from app.source_view import SOURCE_CSS, SourceView, open_citation, open_locator
from memory_db import MemoryStoreError

log = logging.getLogger(__name__)

SOURCE_HELP = "<p>A source an answer cites opens here, its cited sentence highlighted.</p>"
STRUCK_NOTE = "You struck this source as wrong: it is not retrieved for your questions until you undo the strike."


@dataclass
class SourcePanel:
    column: gr.Column
    text: gr.HTML
    strike: gr.Button
    unstrike: gr.Button
    reanswer: gr.Button
    result: gr.Markdown
    file: gr.File

    @property
    def buttons(self) -> list[gr.Button]:
        """The buttons a strike shows and hides."""
        return [self.strike, self.unstrike, self.reanswer]


def build_source_panel() -> SourcePanel:
    """The source column, hidden until a source is opened."""
    with gr.Column(scale=2, min_width=320, visible=False, elem_id="source-view") as source_view:
        source_text = gr.HTML(SOURCE_HELP, elem_id="source-text", css_template=SOURCE_CSS)
        with gr.Row():
            strike = gr.Button("✗ This source is wrong", variant="stop", size="sm", visible=False,
                               elem_id="strike-source")
            unstrike = gr.Button("Undo the strike", size="sm", visible=False, elem_id="unstrike-source")
            reanswer = gr.Button("Re-answer without it", variant="primary", size="sm", visible=False,
                                 elem_id="reanswer")
        strike_result = gr.Markdown(elem_id="strike-result")
        source_file = gr.File(label="The document", interactive=False, elem_id="source-file")
    return SourcePanel(source_view, source_text, strike, unstrike, reanswer, strike_result, source_file)


class SourceEvents:
    """The source column's events: a citation or a document link clicked, a strike and its undo."""

    def __init__(self, ctx: AppContext, shown: ShownRuns) -> None:
        self.ctx, self.shown = ctx, shown

    def source_shown(self, view: SourceView, namespace: str):
        """The source column's updates: the source, its file, what a strike needs, and the buttons."""
        key = view.opened.get("key")
        struck = bool(key) and key in self.ctx.runtime.store.struck_keys(namespace)
        return (gr.Column(visible=True), view.html, view.file, view.opened,
                gr.Button(visible=bool(key) and not struck and not self.ctx.read_only),
                gr.Button(visible=struck), gr.Button(visible=struck), STRUCK_NOTE if struck else "")

    def show_citation(self, evt: gr.EventData, request: gr.Request):
        """A citation mark clicked in the answer (the page sends the citation's key, run:cite:n): its
        source beside the answer, read from this page's run (or the caller's own run log)."""
        data = evt._data if isinstance(evt._data, dict) else {}
        wanted, _, number = str(data.get("key") or "")[:300].rpartition(":cite:")
        namespace = self.ctx.namespace_of(request)
        transcript = self.shown.get(session_of(request), wanted)
        if transcript is None and wanted and not self.ctx.read_only:
            try:
                transcript = logged_transcript(self.ctx, namespace, wanted)
            except (KeyError, ValueError):
                transcript = None
        if transcript is None or not number.isdigit():
            return self.source_shown(SourceView("<p>⚠️ That run is not open on this page; reopen it from your past "
                                                "runs.</p>"), namespace)
        view = open_citation(self.ctx, namespace, self.ctx.user_of(request), transcript, int(number))
        log.info("source [%s] of run %s opened in %.2f s", number, wanted, view.seconds)
        return self.source_shown(view, namespace)

    def show_source(self, evt: gr.EventData, request: gr.Request):
        """A doc:// link clicked in the trace (the page sends its locator as the event's data)."""
        data = evt._data if isinstance(evt._data, dict) else {}
        locator = data.get("locator")
        view = open_locator(self.ctx, self.ctx.namespace_of(request), self.ctx.user_of(request),
                            locator if isinstance(locator, str) and len(locator) <= 2000 else "")
        return self.source_shown(view, self.ctx.namespace_of(request))

    def strike_source(self, source: dict, request: gr.Request):
        """"This is wrong": the open source is not retrieved again in the caller's namespace."""
        if not source.get("key"):
            return "Open a source from the answer's citations first.", *(gr.update(),) * 3
        namespace = self.ctx.namespace_of(request)
        try:
            self.ctx.require_writable()
            memory_id = source.get("memory_id")
            struck = self.ctx.runtime.store.strike(
                source["key"], namespace=namespace, title=source.get("title") or "(untitled)",
                source=source.get("source") or "", url=source.get("url"), sentence=source.get("sentence"),
                memory_id=memory_id, run_id=source.get("run_id"), actor=self.ctx.user_of(request))
        except (ReadOnlyModeError, MemoryStoreError) as exc:
            return f"⚠️ {escape_markdown(exc)}", *(gr.update(),) * 3
        recorded = (" The strike is in the history of this run's memory (the Memory view), with undo."
                    if struck.strike_history_id is not None else "")
        return (f"Struck: **{escape_markdown(struck.title)}** is no longer retrieved for your questions. "
                f"Re-answer the question without it, or undo the strike.{recorded}",
                gr.Button(visible=False), gr.Button(visible=True), gr.Button(visible=True))

    def unstrike_source(self, source: dict, request: gr.Request):
        if not source.get("key"):
            return "Open a source from the answer's citations first.", *(gr.update(),) * 3
        try:
            self.ctx.require_writable()
            self.ctx.runtime.store.unstrike(source["key"], namespace=self.ctx.namespace_of(request),
                                            actor=self.ctx.user_of(request))
        except (ReadOnlyModeError, MemoryStoreError) as exc:
            return f"⚠️ {escape_markdown(exc)}", *(gr.update(),) * 3
        return (f"Undone: **{escape_markdown(source.get('title'))}** is retrieved again.",
                gr.Button(visible=True), gr.Button(visible=False), gr.Button(visible=True))
