"""The memory view: search and filter, a sortable table, a detail panel to curate one memory (delete
asks first; strike it as wrong), its history with undo of the change clicked, where it was used, the
sources struck as wrong with undo, and export / import with a preview that says which memories are
already here and lets Import skip or replace them."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from app.memory_actions import do_delete, do_pin, do_relabel, do_save, do_strike, do_undo
from app.memory_detail import DetailEvents, MemoryDetail, build_memory_detail
from app.memory_struck import StruckEvents, StruckSources, build_struck_sources
from app.memory_table import MemoryTable, TableEvents, build_memory_table
from app.memory_transfer import MemoryTransfer, TransferEvents, build_memory_transfer
from app.session import AppContext


def linked_memory(request: gr.Request | None) -> str:
    """The memory id of a ?memory=ID link from the research trace, or ''."""
    params = getattr(request, "query_params", None) or {}
    return str(params.get("memory", "") or "")[:64]


@dataclass
class MemoryPage:
    """The memory view's parts, as built, for wiring their events."""
    selected: gr.State  # the id of the memory open in the detail panel
    table: MemoryTable
    detail: MemoryDetail
    struck: StruckSources
    transfer: MemoryTransfer

    @property
    def detail_outputs(self) -> list:
        """open_memory's outputs."""
        d = self.detail
        return [self.selected, d.detail, d.summary, d.plan, d.history, d.used, d.undo_id, d.undo_choice]


@dataclass
class MemoryEvents:
    """The handlers of the view's events, by part."""
    table: TableEvents
    detail: DetailEvents
    struck: StruckEvents
    transfer: TransferEvents


def build_memory_tab(ctx: AppContext):
    """Builds the view inside the current Blocks; returns (on_load function, its outputs) for page load."""
    selected = gr.State("")
    table = build_memory_table()
    detail = build_memory_detail()
    struck = build_struck_sources()
    transfer = build_memory_transfer()
    page = MemoryPage(selected, table, detail, struck, transfer)
    events = MemoryEvents(TableEvents(ctx), DetailEvents(ctx), StruckEvents(ctx), TransferEvents(ctx))

    def on_load(request: gr.Request):
        admin = ctx.users is not None and ctx.is_admin(request)
        own = ctx.namespace_of(request)
        choices = sorted({own, *ctx.runtime.store.namespaces()}) if admin else [own]
        listing = events.table.list_memories(own, "", False, "all", "all", "all", False, "newest", request)
        linked = linked_memory(request)
        opened = (events.detail.open_memory(own, linked, request) if linked
                  else [gr.update()] * len(page.detail_outputs))
        return (gr.update(choices=choices, value=own, visible=admin), *listing, linked or gr.update(), *opened,
                *events.struck.list_struck(own, request))

    wire_events(page, events)
    return on_load, [table.namespace, table.count, table.table, detail.memory_id, *page.detail_outputs,
                     *struck.outputs]


def wire_events(page: MemoryPage, events: MemoryEvents) -> None:
    """The view's events, in the order the view registers them: the table, the detail panel's buttons,
    the struck sources, the right answer, delete and its confirmation, undo, export and import."""
    table, detail, struck, transfer = page.table, page.detail, page.struck, page.transfer
    list_memories, open_memory = events.table.list_memories, events.detail.open_memory
    list_struck = events.struck.list_struck
    namespace, selected, filters, detail_outputs = table.namespace, page.selected, table.filters, page.detail_outputs
    listed = [table.count, table.table]
    table.search.click(list_memories, filters, listed)
    table.query.submit(list_memories, filters, listed)
    namespace.change(list_memories, filters, listed)
    (table.table.select(events.detail.pick_row, None, [detail.memory_id])
     .then(open_memory, [namespace, detail.memory_id], detail_outputs))
    detail.open_button.click(open_memory, [namespace, detail.memory_id], detail_outputs)
    edit_inputs = [namespace, selected, detail.summary, detail.plan, detail.undo_id]
    for button, action in ((detail.save, do_save), (detail.mark_good, do_relabel(True)),
                           (detail.mark_bad, do_relabel(False)), (detail.pin, do_pin), (detail.strike, do_strike),
                           (detail.confirm_delete, do_delete), (detail.undo, do_undo)):
        (button.click(events.detail.change(action), edit_inputs, [detail.action_result])
         .then(open_memory, [namespace, selected], detail_outputs)
         .then(list_memories, filters, listed)
         .then(list_struck, [namespace], struck.outputs))
    struck.table.select(events.struck.pick_struck, [struck.keys], [struck.chosen, struck.choice])
    (struck.undo.click(events.struck.undo_struck, [namespace, struck.chosen], [detail.action_result])
     .then(list_struck, [namespace], struck.outputs)
     .then(open_memory, [namespace, selected], detail_outputs))
    namespace.change(list_struck, [namespace], struck.outputs)
    (detail.set_answer.click(events.detail.do_set_answer, [namespace, selected, detail.right_answer],
                             [detail.action_result])
     .then(open_memory, [namespace, selected], detail_outputs)
     .then(list_memories, filters, listed))
    detail.delete.click(events.detail.ask_delete, [selected], [detail.confirm_row, detail.confirm_text,
                                                                detail.action_result])
    detail.confirm_delete.click(lambda: gr.Row(visible=False), None, [detail.confirm_row])
    detail.cancel_delete.click(lambda: (gr.Row(visible=False), "Nothing was deleted."), None,
                               [detail.confirm_row, detail.action_result])
    detail.history.select(events.detail.pick_change, [namespace, selected], [detail.undo_id, detail.undo_choice])
    transfer.export.click(events.transfer.export_namespace, [namespace], [transfer.export_file, transfer.import_result])
    transfer.import_file.change(events.transfer.preview_import, [namespace, transfer.import_file],
                                [transfer.preview_text, transfer.preview, transfer.existing_choice])
    (transfer.do_import.click(events.transfer.apply_import, [namespace, transfer.import_file, transfer.existing_choice],
                              [transfer.import_result])
     .then(list_memories, filters, listed))
