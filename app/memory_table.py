"""The Memory view's search: the namespace (admins), words or meaning, filters and a sort, and the
sortable table of the memories found, with how many there are."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.escaping import escape_markdown
from app.memory_view import (COLUMNS, KNOWN_ERRORS, LABELS, SORTS, MemoryFilter, find_memories, problem, table_rows,
                             unreadable_note)
from app.session import AppContext
from memory_db import MODALITIES, QUESTION_TYPES


@dataclass
class MemoryTable:
    namespace: gr.Dropdown
    query: gr.Textbox
    semantic: gr.Checkbox
    label: gr.Dropdown
    modality: gr.Dropdown
    qtype: gr.Dropdown
    pinned: gr.Checkbox
    sort: gr.Dropdown
    search: gr.Button
    count: gr.Markdown
    table: gr.Dataframe

    @property
    def filters(self) -> list:
        """list_memories' inputs."""
        return [self.namespace, self.query, self.semantic, self.label, self.modality, self.qtype, self.pinned,
                self.sort]


def build_memory_table() -> MemoryTable:
    with gr.Row():
        namespace = gr.Dropdown(label="Namespace (admins)", choices=[], allow_custom_value=True, visible=False,
                                elem_id="namespace", scale=1)
        query = gr.Textbox(label="Search", placeholder="words in the question, summary or plan", elem_id="memory-query",
                           scale=3)
        semantic = gr.Checkbox(label="Semantic (by meaning)", elem_id="memory-semantic", scale=1)
    with gr.Row():
        label = gr.Dropdown(list(LABELS), value="all", label="Label", elem_id="memory-label")
        modality = gr.Dropdown(["all", *MODALITIES], value="all", label="Modality", elem_id="memory-modality")
        qtype = gr.Dropdown(["all", *QUESTION_TYPES], value="all", label="Question type", elem_id="memory-type")
        pinned = gr.Checkbox(label="Pinned only", elem_id="memory-pinned")
        sort = gr.Dropdown(list(SORTS), value="newest", label="Sort by", elem_id="memory-sort")
        search = gr.Button("Search", variant="primary", elem_id="memory-search")
    count = gr.Markdown(elem_id="memory-count")
    table = gr.Dataframe(headers=COLUMNS, interactive=False, wrap=True, max_height=420, elem_id="memory-table",
                         column_widths=["11%", "20%", "11%", "12%", "6%", "6%", "5%", "5%", "6%", "5%", "13%"])
    return MemoryTable(namespace, query, semantic, label, modality, qtype, pinned, sort, search, count, table)


class TableEvents:
    """The table listed for the filters as set: the count line and the rows."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx

    def list_memories(self, ns, q, sem, lab, mod, qt, pin_only, order, request: gr.Request):
        ctx = self.ctx
        space = ctx.visible_namespace(request, ns)
        f = MemoryFilter(q or "", bool(sem), lab, mod, qt, bool(pin_only), order)
        try:
            found = find_memories(ctx.runtime.store, space, f)
        except KNOWN_ERRORS as exc:
            return problem(exc), []
        total = ctx.runtime.store.count(namespace=space)
        note = unreadable_note(ctx.runtime.store, space)
        counted = f"{len(found)} shown of {total} memories in namespace `{escape_markdown(space)}`."
        return counted + (f"\n\n{note}" if note else ""), table_rows(found)
