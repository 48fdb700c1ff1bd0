"""The memory view: search and filter, a sortable table, a detail panel to curate one memory (delete
asks first; strike it as wrong), its history with undo of the change clicked, where it was used, the
sources struck as wrong with undo, and export / import with a preview that says which memories are
already here and lets Import skip or replace them."""

from __future__ import annotations

import logging

import gradio as gr

from app.escaping import escape_markdown
from app.memory_view import (
    ALREADY_HERE, COLUMNS, EXISTING_CHOICES, IMPORT_PREVIEW_COLUMNS, LABELS, SORTS, STRUCK_COLUMNS, MemoryFilter,
    detail_markdown, find_memories, history_rows, import_message, import_preview, runs_using, struck_concerns,
    struck_rows, table_rows, undo_line, unreadable_note,
)
from app.memory_answer import set_right_answer
from app.session import AppContext, ReadOnlyModeError
from memory_db import (MODALITIES, QUESTION_TYPES, ImportFileError, MemoryNotFoundError, MemoryStoreError,
                       UnreadableMemoryError, memory_key)

log = logging.getLogger(__name__)

HISTORY_COLUMNS = ["history id", "action", "changed", "by", "when"]
USED_COLUMNS = ["run id", "question", "known from"]
KNOWN_ERRORS = (MemoryStoreError, ReadOnlyModeError, ValueError, OSError)
NOT_AN_UPLOAD = ("⚠️ Upload the export file again with the file box above: an import reads only a file you "
                 "uploaded yourself. Nothing was imported.")


def _problem(exc: Exception) -> str:
    return f"⚠️ {escape_markdown(exc)}"


def linked_memory(request: gr.Request | None) -> str:
    """The memory id of a ?memory=ID link from the research trace, or ''."""
    params = getattr(request, "query_params", None) or {}
    return str(params.get("memory", "") or "")[:64]


def build_memory_tab(ctx: AppContext):
    """Builds the view inside the current Blocks; returns (on_load function, its outputs) for page load."""
    selected = gr.State("")
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

    with gr.Accordion("Struck sources: not retrieved again in this namespace", open=False, elem_id="struck-sources"):
        struck_table = gr.Dataframe(headers=STRUCK_COLUMNS, interactive=False, wrap=True, max_height=260,
                                    label="Click a row to select it for undo", elem_id="struck-table")
        struck_keys = gr.State([])  # the keys of the rows shown, in order (kept on the server)
        struck_chosen = gr.State(None)
        with gr.Row():
            struck_choice = gr.Markdown(elem_id="struck-selected")
            struck_undo = gr.Button("Undo the strike", elem_id="struck-undo", scale=0)
        struck_result = gr.Markdown(elem_id="struck-result")

    with gr.Accordion("Export and import", open=False, elem_id="transfer"):
        with gr.Row():
            export = gr.Button("Export this namespace (JSON lines)", elem_id="memory-export")
            export_file = gr.File(label="Export", interactive=False, elem_id="export-file")
        import_file = gr.File(label="Import file (.jsonl)", file_types=[".jsonl", ".json"], type="filepath",
                              elem_id="import-file")
        preview_text = gr.Markdown(elem_id="import-preview-text")
        preview = gr.Dataframe(headers=IMPORT_PREVIEW_COLUMNS, interactive=False,
                               label="Preview", elem_id="import-preview", max_height=240)
        existing_choice = gr.Radio(list(EXISTING_CHOICES), value=next(iter(EXISTING_CHOICES)), visible=False,
                                   label="Memories already in this namespace (same id)", elem_id="import-existing")
        do_import = gr.Button("Import", elem_id="memory-import")
        import_result = gr.Markdown(elem_id="import-result")

    filters = [namespace, query, semantic, label, modality, qtype, pinned, sort]
    detail_outputs = [selected, detail, summary, plan, history, used, undo_id, undo_choice]

    def list_memories(ns, q, sem, lab, mod, qt, pin_only, order, request: gr.Request):
        space = ctx.visible_namespace(request, ns)
        f = MemoryFilter(q or "", bool(sem), lab, mod, qt, bool(pin_only), order)
        try:
            found = find_memories(ctx.runtime.store, space, f)
        except KNOWN_ERRORS as exc:
            return _problem(exc), []
        total = ctx.runtime.store.count(namespace=space)
        note = unreadable_note(ctx.runtime.store, space)
        counted = f"{len(found)} shown of {total} memories in namespace `{escape_markdown(space)}`."
        return counted + (f"\n\n{note}" if note else ""), table_rows(found)

    def open_memory(ns, wanted: str, request: gr.Request):
        space = ctx.visible_namespace(request, ns)
        wanted = (wanted or "").strip()
        struck = ctx.runtime.store.struck(space, include_undone=True)
        concerns = struck_concerns(struck)
        try:
            m = ctx.runtime.store.get(wanted, namespace=space)
        except MemoryNotFoundError as exc:
            entries = ctx.runtime.store.history(wanted, namespace=space) if wanted else []
            if not entries:
                return "", _problem(exc), "", "", [], [], None, ""
            note = f"Memory `{escape_markdown(wanted)}` is deleted; undo the deletion from its history below."
            return wanted, note, "", "", history_rows(entries, concerns), [], entries[0].id, undo_line(entries[0])
        except UnreadableMemoryError as exc:  # selected all the same, so that Delete can remove it
            entries = ctx.runtime.store.history(wanted, namespace=space)
            return wanted, _problem(exc), "", "", history_rows(entries, concerns), [], None, ""
        except KNOWN_ERRORS as exc:
            return "", _problem(exc), "", "", [], [], None, ""
        entries = ctx.runtime.store.history(m.id, namespace=space)
        usage = runs_using(ctx.runtime.store, ctx.runtime.runlog, space, m.id)
        newest = entries[0] if entries else None
        detail = detail_markdown(m)
        if any(s.active and s.key == memory_key(m.id) for s in struck):
            detail += ("\n\n**Struck as wrong:** this memory is not retrieved for new questions; undo it from its "
                       "history or the struck sources below.")
        return (m.id, detail, m.summary, m.plan, history_rows(entries, concerns), usage,
                newest.id if newest else None, undo_line(newest))

    def pick_row(evt: gr.SelectData) -> str:
        return str(evt.row_value[0]) if evt.row_value else ""

    def pick_change(ns, current: str, evt: gr.SelectData, request: gr.Request):
        """A click on a history row selects that change for undo."""
        try:
            wanted = int(evt.row_value[0]) if evt.row_value else None
        except (TypeError, ValueError):
            wanted = None
        entries = ctx.runtime.store.history(current, namespace=ctx.visible_namespace(request, ns)) if current else []
        entry = next((e for e in entries if e.id == wanted), None)
        return (entry.id, undo_line(entry)) if entry is not None else (gr.update(), gr.update())

    def ask_delete(current: str):
        """Delete asks first: it names the memory; a second button deletes."""
        if not current:
            return gr.Row(visible=False), "", "Open a memory first."
        if ctx.read_only:
            return gr.Row(visible=False), "", _problem(ReadOnlyModeError())
        return (gr.Row(visible=True),
                f"Delete memory `{escape_markdown(current[:8])}`? Its history stays, so undo can bring it back.", "")

    def change(action):
        def handler(ns, current: str, new_summary: str, new_plan: str, history_id, request: gr.Request) -> str:
            if not current:
                return "Open a memory first."
            space = ctx.visible_namespace(request, ns)
            store, actor = ctx.runtime.store, ctx.user_of(request)
            try:
                ctx.require_writable()
                return action(store, current, space, actor, new_summary, new_plan, history_id)
            except KNOWN_ERRORS as exc:
                return _problem(exc)
        return handler

    def do_save(store, mid, space, actor, new_summary, new_plan, _):
        store.edit(mid, namespace=space, summary=new_summary, plan=new_plan, actor=actor)
        return f"Saved the edits to `{mid[:8]}`."

    def do_relabel(correct: bool):
        def act(store, mid, space, actor, *_):
            store.relabel(mid, namespace=space, correct=correct, actor=actor)
            return f"`{mid[:8]}` is now a {'successful strategy' if correct else 'failure lesson'}."
        return act

    def do_pin(store, mid, space, actor, *_):
        now = not store.get(mid, namespace=space).pinned
        store.pin(mid, namespace=space, pinned=now, actor=actor)
        return f"`{mid[:8]}` {'pinned: it is never evicted' if now else 'unpinned'}."

    def do_strike(store, mid, space, actor, *_):
        m = store.get(mid, namespace=space)
        store.strike(memory_key(mid), namespace=space, kind="memory", title=m.question, memory_id=mid, actor=actor)
        return (f"Struck `{mid[:8]}`: it is not retrieved for new questions in this namespace; undo it from its "
                "history or the struck sources.")

    def list_struck(ns, request: gr.Request):
        """The sources struck in the namespace, with their keys for undo (kept on the server)."""
        try:
            sources = ctx.runtime.store.struck(ctx.visible_namespace(request, ns))
        except KNOWN_ERRORS as exc:
            return [], [], None, _problem(exc)
        return struck_rows(sources), [s.key for s in sources], None, "" if sources else "Nothing is struck."

    def pick_struck(keys: list, evt: gr.SelectData):
        row = evt.index[0] if isinstance(evt.index, (list, tuple)) else evt.index
        if not isinstance(row, int) or not 0 <= row < len(keys):
            return None, ""
        return keys[row], f"Selected for undo: struck source #{row + 1}."

    def undo_struck(ns, key, request: gr.Request) -> str:
        if not key:
            return "Click a struck source in the table first."
        try:
            ctx.require_writable()
            undone = ctx.runtime.store.unstrike(key, namespace=ctx.visible_namespace(request, ns),
                                                actor=ctx.user_of(request))
        except KNOWN_ERRORS as exc:
            return _problem(exc)
        return f"Undone: **{escape_markdown(undone.title)}** is retrieved again."

    def do_delete(store, mid, space, actor, *_):
        store.delete(mid, namespace=space, actor=actor)
        return f"Deleted `{mid[:8]}`; undo it from the history below."

    def do_undo(store, mid, space, actor, _s, _p, history_id):
        if history_id is None:
            return "Click the change to undo in the history first."
        restored = store.undo(int(history_id), namespace=space, actor=actor)
        return f"Undid change {int(history_id)}" + (f"; `{restored.id[:8]}` restored." if restored else "; the memory is gone again.")

    def export_namespace(ns, request: gr.Request):
        space, user = ctx.visible_namespace(request, ns), ctx.user_of(request)
        out = ctx.files.new_folder(user) / f"memories-{space}.jsonl"
        written = ctx.runtime.store.export_jsonl(space, out)
        ctx.files.grant(out, user)  # served to this user alone
        return str(out), f"Exported {written} memories from `{escape_markdown(space)}`."

    max_text_chars = ctx.runtime.config.agent.max_question_chars  # an imported text is held to a question's limit

    def own_upload(path: str, request: gr.Request) -> bool:
        """Whether `path` is a file this request's user uploaded: the path arrives from the browser,
        and a forged one may name any file of the cache, such as another user's export."""
        if ctx.files.is_upload_of(path, ctx.user_of(request)):
            return True
        log.warning("import by %s refused: %s is not a file they uploaded", ctx.user_of(request), path)
        return False

    def preview_import(ns, path: str | None, request: gr.Request):
        if not path:
            return "", [], gr.Radio(visible=False)
        if not own_upload(path, request):
            return NOT_AN_UPLOAD, [], gr.Radio(visible=False)
        try:
            text, rows = import_preview(path, ctx.visible_namespace(request, ns), ctx.runtime.store,
                                        max_text_chars=max_text_chars)
        except ImportFileError as exc:
            ctx.files.discard(path)  # a file that cannot be imported is of no further use
            return _problem(exc) + " Nothing was imported.", [], gr.Radio(visible=False)
        except KNOWN_ERRORS as exc:
            return _problem(exc) + " Nothing was imported.", [], gr.Radio(visible=False)
        return text, rows, gr.Radio(visible=any(row[-1] == ALREADY_HERE for row in rows))

    def apply_import(ns, path: str | None, choice: str, request: gr.Request) -> str:
        if not path:
            return "Choose an export file first."
        if not own_upload(path, request):
            return NOT_AN_UPLOAD
        space = ctx.visible_namespace(request, ns)
        try:
            ctx.require_writable()
            outcome = ctx.runtime.store.import_file(space, path, actor=f"import:{ctx.user_of(request)}",
                                                    existing=EXISTING_CHOICES.get(choice, "skip"),
                                                    max_text_chars=max_text_chars)
        except ImportFileError as exc:
            ctx.files.discard(path)
            return _problem(exc) + " Nothing was imported."
        except KNOWN_ERRORS as exc:
            return _problem(exc) + " Nothing was imported."
        return import_message(outcome, space)  # the file stays for another choice; the cache's sweep takes it

    def on_load(request: gr.Request):
        admin = ctx.users is not None and ctx.is_admin(request)
        own = ctx.namespace_of(request)
        choices = sorted({own, *ctx.runtime.store.namespaces()}) if admin else [own]
        listing = list_memories(own, "", False, "all", "all", "all", False, "newest", request)
        linked = linked_memory(request)
        opened = open_memory(own, linked, request) if linked else [gr.update()] * len(detail_outputs)
        return (gr.update(choices=choices, value=own, visible=admin), *listing, linked or gr.update(), *opened,
                *list_struck(own, request))

    search.click(list_memories, filters, [count, table])
    query.submit(list_memories, filters, [count, table])
    namespace.change(list_memories, filters, [count, table])
    table.select(pick_row, None, [memory_id]).then(open_memory, [namespace, memory_id], detail_outputs)
    open_button.click(open_memory, [namespace, memory_id], detail_outputs)
    edit_inputs = [namespace, selected, summary, plan, undo_id]
    struck_outputs = [struck_table, struck_keys, struck_chosen, struck_result]
    for button, action in ((save, do_save), (mark_good, do_relabel(True)), (mark_bad, do_relabel(False)),
                           (pin, do_pin), (strike, do_strike), (confirm_delete, do_delete), (undo, do_undo)):
        (button.click(change(action), edit_inputs, [action_result])
         .then(open_memory, [namespace, selected], detail_outputs)
         .then(list_memories, filters, [count, table])
         .then(list_struck, [namespace], struck_outputs))
    struck_table.select(pick_struck, [struck_keys], [struck_chosen, struck_choice])
    (struck_undo.click(undo_struck, [namespace, struck_chosen], [action_result])
     .then(list_struck, [namespace], struck_outputs)
     .then(open_memory, [namespace, selected], detail_outputs))
    namespace.change(list_struck, [namespace], struck_outputs)
    def do_set_answer(ns, current: str, typed: str, request: gr.Request) -> str:
        return set_right_answer(ctx, request, ctx.visible_namespace(request, ns), current, typed)

    (set_answer.click(do_set_answer, [namespace, selected, right_answer], [action_result])
     .then(open_memory, [namespace, selected], detail_outputs)
     .then(list_memories, filters, [count, table]))
    delete.click(ask_delete, [selected], [confirm_row, confirm_text, action_result])
    confirm_delete.click(lambda: gr.Row(visible=False), None, [confirm_row])
    cancel_delete.click(lambda: (gr.Row(visible=False), "Nothing was deleted."), None, [confirm_row, action_result])
    history.select(pick_change, [namespace, selected], [undo_id, undo_choice])
    export.click(export_namespace, [namespace], [export_file, import_result])
    import_file.change(preview_import, [namespace, import_file], [preview_text, preview, existing_choice])
    do_import.click(apply_import, [namespace, import_file, existing_choice], [import_result]).then(list_memories, filters, [count, table])
    return on_load, [namespace, count, table, memory_id, *detail_outputs, *struck_outputs]
