"""The Memory view's detail panel: one memory opened (a table row clicked, or an id pasted), its
summary and plan to edit, relabel, pin, strike as wrong, delete (asked first), its right answer set,
its history with undo of the change clicked, and the runs that used it."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.escaping import escape_markdown
from app.memory_answer import set_right_answer
from app.memory_view import (KNOWN_ERRORS, detail_markdown, history_rows, problem, runs_using, struck_concerns,
                             undo_line)
from app.session import AppContext, ReadOnlyModeError
from memory_db import MemoryNotFoundError, UnreadableMemoryError, memory_key

HISTORY_COLUMNS = ["history id", "action", "changed", "by", "when"]
USED_COLUMNS = ["run id", "question", "known from"]


@dataclass
class MemoryDetail:
    memory_id: gr.Textbox
    open_button: gr.Button
    detail: gr.Markdown
    summary: gr.Textbox
    plan: gr.Textbox
    save: gr.Button
    mark_good: gr.Button
    mark_bad: gr.Button
    pin: gr.Button
    strike: gr.Button
    delete: gr.Button
    confirm_row: gr.Row
    confirm_text: gr.Markdown
    confirm_delete: gr.Button
    cancel_delete: gr.Button
    right_answer: gr.Textbox
    set_answer: gr.Button
    action_result: gr.Markdown
    history: gr.Dataframe
    undo_id: gr.State
    undo_choice: gr.Markdown
    undo: gr.Button
    used: gr.Dataframe


def build_memory_detail() -> MemoryDetail:
    with gr.Group(elem_classes=["memory-detail"]):  # a Group draws its elem_id on two elements (Gradio 6)
        with gr.Row():
            memory_id = gr.Textbox(label="Memory id (click a row, or paste an id)", elem_id="memory-id", scale=3)
            open_button = gr.Button("Open", elem_id="memory-open", scale=1)
        detail = gr.Markdown("Pick a memory from the table to see and curate it.", elem_id="memory-detail-text")
        summary = gr.Textbox(label="Workflow summary", lines=4, elem_id="memory-summary")
        plan = gr.Textbox(label="Plan", lines=4, elem_id="memory-plan")
        with gr.Row():
            save = gr.Button("Save edits", elem_id="memory-save")
            mark_good = gr.Button("Relabel: successful", elem_id="memory-relabel-good")
            mark_bad = gr.Button("Relabel: failed", elem_id="memory-relabel-bad")
            pin = gr.Button("Pin / unpin", elem_id="memory-pin")
            strike = gr.Button("✗ Wrong: strike it", elem_id="memory-strike")
            delete = gr.Button("Delete", variant="stop", elem_id="memory-delete")
        with gr.Row(visible=False, elem_id="delete-confirm") as confirm_row:
            confirm_text = gr.Markdown(elem_id="delete-confirm-text")
            confirm_delete = gr.Button("Yes, delete it", variant="stop", elem_id="memory-delete-yes", size="sm")
            cancel_delete = gr.Button("Cancel", elem_id="memory-delete-cancel", size="sm")
        with gr.Row():
            right_answer = gr.Textbox(label="The right answer (graded and kept as on the Research page)",
                                      elem_id="memory-right-answer", scale=3)
            set_answer = gr.Button("Set the right answer", elem_id="memory-set-answer", scale=1)
        action_result = gr.Markdown(elem_id="memory-action-result")
        history = gr.Dataframe(headers=HISTORY_COLUMNS, interactive=False,
                               label="History (newest first): click a change to select it for undo",
                               elem_id="memory-history", max_height=240)
        undo_id = gr.State(None)
        with gr.Row():
            undo_choice = gr.Markdown(elem_id="undo-selected")
            undo = gr.Button("Undo the selected change", elem_id="memory-undo", scale=0)
        used = gr.Dataframe(headers=USED_COLUMNS, interactive=False, label="Runs that used this memory",
                            elem_id="memory-used", max_height=200)
    return MemoryDetail(memory_id, open_button, detail, summary, plan, save, mark_good, mark_bad, pin, strike, delete,
                        confirm_row, confirm_text, confirm_delete, cancel_delete, right_answer, set_answer,
                        action_result, history, undo_id, undo_choice, undo, used)


class DetailEvents:
    """A memory opened in the panel, a change picked for undo, and the panel's buttons (app/memory_actions.py)."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx

    def open_memory(self, ns, wanted: str, request: gr.Request):
        ctx = self.ctx
        space = ctx.visible_namespace(request, ns)
        wanted = (wanted or "").strip()
        struck = ctx.runtime.store.struck(space, include_undone=True)
        concerns = struck_concerns(struck)
        try:
            m = ctx.runtime.store.get(wanted, namespace=space)
        except MemoryNotFoundError as exc:
            entries = ctx.runtime.store.history(wanted, namespace=space) if wanted else []
            if not entries:
                return "", problem(exc), "", "", [], [], None, ""
            note = f"Memory `{escape_markdown(wanted)}` is deleted; undo the deletion from its history below."
            return wanted, note, "", "", history_rows(entries, concerns), [], entries[0].id, undo_line(entries[0])
        except UnreadableMemoryError as exc:  # selected all the same, so that Delete can remove it
            entries = ctx.runtime.store.history(wanted, namespace=space)
            return wanted, problem(exc), "", "", history_rows(entries, concerns), [], None, ""
        except KNOWN_ERRORS as exc:
            return "", problem(exc), "", "", [], [], None, ""
        entries = ctx.runtime.store.history(m.id, namespace=space)
        usage = runs_using(ctx.runtime.store, ctx.runtime.runlog, space, m.id)
        newest = entries[0] if entries else None
        detail = detail_markdown(m)
        if any(s.active and s.key == memory_key(m.id) for s in struck):
            detail += ("\n\n**Struck as wrong:** this memory is not retrieved for new questions; undo it from its "
                       "history or the struck sources below.")
        return (m.id, detail, m.summary, m.plan, history_rows(entries, concerns), usage,
                newest.id if newest else None, undo_line(newest))

    @staticmethod
    def pick_row(evt: gr.SelectData) -> str:
        return str(evt.row_value[0]) if evt.row_value else ""

    def pick_change(self, ns, current: str, evt: gr.SelectData, request: gr.Request):
        """A click on a history row selects that change for undo."""
        ctx = self.ctx
        try:
            wanted = int(evt.row_value[0]) if evt.row_value else None
        except (TypeError, ValueError):
            wanted = None
        entries = ctx.runtime.store.history(current, namespace=ctx.visible_namespace(request, ns)) if current else []
        entry = next((e for e in entries if e.id == wanted), None)
        return (entry.id, undo_line(entry)) if entry is not None else (gr.update(), gr.update())

    def ask_delete(self, current: str):
        """Delete asks first: it names the memory; a second button deletes."""
        if not current:
            return gr.Row(visible=False), "", "Open a memory first."
        if self.ctx.read_only:
            return gr.Row(visible=False), "", problem(ReadOnlyModeError())
        return (gr.Row(visible=True),
                f"Delete memory `{escape_markdown(current[:8])}`? Its history stays, so undo can bring it back.", "")

    def change(self, action):
        def handler(ns, current: str, new_summary: str, new_plan: str, history_id, request: gr.Request) -> str:
            if not current:
                return "Open a memory first."
            ctx = self.ctx
            space = ctx.visible_namespace(request, ns)
            store, actor = ctx.runtime.store, ctx.user_of(request)
            try:
                ctx.require_writable()
                return action(store, current, space, actor, new_summary, new_plan, history_id)
            except KNOWN_ERRORS as exc:
                return problem(exc)
        return handler

    def do_set_answer(self, ns, current: str, typed: str, request: gr.Request) -> str:
        return set_right_answer(self.ctx, request, self.ctx.visible_namespace(request, ns), current, typed)
