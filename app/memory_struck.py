"""The Memory view's struck sources: what was struck as wrong in the namespace (a source from the
research page, or a memory), not retrieved again, each with undo."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.escaping import escape_markdown
from app.memory_view import KNOWN_ERRORS, STRUCK_COLUMNS, problem, struck_rows
from app.session import AppContext


@dataclass
class StruckSources:
    table: gr.Dataframe
    keys: gr.State
    chosen: gr.State
    choice: gr.Markdown
    undo: gr.Button
    result: gr.Markdown

    @property
    def outputs(self) -> list:
        """list_struck's outputs."""
        return [self.table, self.keys, self.chosen, self.result]


def build_struck_sources() -> StruckSources:
    with gr.Accordion("Struck sources: not retrieved again in this namespace", open=False, elem_id="struck-sources"):
        struck_table = gr.Dataframe(headers=STRUCK_COLUMNS, interactive=False, wrap=True, max_height=260,
                                    label="Click a row to select it for undo", elem_id="struck-table")
        struck_keys = gr.State([])  # the keys of the rows shown, in order (kept on the server)
        struck_chosen = gr.State(None)
        with gr.Row():
            struck_choice = gr.Markdown(elem_id="struck-selected")
            struck_undo = gr.Button("Undo the strike", elem_id="struck-undo", scale=0)
        struck_result = gr.Markdown(elem_id="struck-result")
    return StruckSources(struck_table, struck_keys, struck_chosen, struck_choice, struck_undo, struck_result)


class StruckEvents:
    """The struck sources listed, one picked, and its strike undone."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx

    def list_struck(self, ns, request: gr.Request):
        """The sources struck in the namespace, with their keys for undo (kept on the server)."""
        ctx = self.ctx
        try:
            sources = ctx.runtime.store.struck(ctx.visible_namespace(request, ns))
        except KNOWN_ERRORS as exc:
            return [], [], None, problem(exc)
        return struck_rows(sources), [s.key for s in sources], None, "" if sources else "Nothing is struck."

    @staticmethod
    def pick_struck(keys: list, evt: gr.SelectData):
        row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        if not isinstance(row, int) or not 0 <= row < len(keys):
            return None, ""
        return keys[row], f"Selected for undo: struck source #{row + 1}."

    def undo_struck(self, ns, key, request: gr.Request) -> str:
        if not key:
            return "Click a struck source in the table first."
        ctx = self.ctx
        try:
            ctx.require_writable()
            undone = ctx.runtime.store.unstrike(key, namespace=ctx.visible_namespace(request, ns),
                                                actor=ctx.user_of(request))
        except KNOWN_ERRORS as exc:
            return problem(exc)
        return f"Undone: **{escape_markdown(undone.title)}** is retrieved again."
