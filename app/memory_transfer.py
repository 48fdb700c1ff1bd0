"""The Memory view's export and import: a namespace exported as JSON lines for its user alone; a file
imported after a preview that says which memories are already here, which Import skips or replaces."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import gradio as gr

from app.escaping import escape_markdown
from app.memory_view import (ALREADY_HERE, EXISTING_CHOICES, IMPORT_PREVIEW_COLUMNS, KNOWN_ERRORS, import_message,
                             import_preview, problem)
from app.session import AppContext
from memory_db import ImportFileError

log = logging.getLogger(__name__)

NOT_AN_UPLOAD = ("⚠️ Upload the export file again with the file box above: an import reads only a file you "
                 "uploaded yourself. Nothing was imported.")


@dataclass
class MemoryTransfer:
    export: gr.Button
    export_file: gr.File
    import_file: gr.File
    preview_text: gr.Markdown
    preview: gr.Dataframe
    existing_choice: gr.Radio
    do_import: gr.Button
    import_result: gr.Markdown


def build_memory_transfer() -> MemoryTransfer:
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
    return MemoryTransfer(export, export_file, import_file, preview_text, preview, existing_choice, do_import,
                          import_result)


class TransferEvents:
    """A namespace exported; an import file previewed, then imported."""

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self.max_text_chars = ctx.runtime.config.agent.max_question_chars  # an imported text is held to a question's limit

    def export_namespace(self, ns, request: gr.Request):
        ctx = self.ctx
        space, user = ctx.visible_namespace(request, ns), ctx.user_of(request)
        out = ctx.files.new_folder(user) / f"memories-{space}.jsonl"
        written = ctx.runtime.store.export_jsonl(space, out)
        ctx.files.grant(out, user)  # served to this user alone
        return str(out), f"Exported {written} memories from `{escape_markdown(space)}`."

    def own_upload(self, path: str, request: gr.Request) -> bool:
        """Whether `path` is a file this request's user uploaded: the path arrives from the browser,
        and a forged one may name any file of the cache, such as another user's export."""
        if self.ctx.files.is_upload_of(path, self.ctx.user_of(request)):
            return True
        log.warning("import by %s refused: %s is not a file they uploaded", self.ctx.user_of(request), path)
        return False

    def preview_import(self, ns, path: str | None, request: gr.Request):
        if not path:
            return "", [], gr.Radio(visible=False)
        if not self.own_upload(path, request):
            return NOT_AN_UPLOAD, [], gr.Radio(visible=False)
        ctx = self.ctx
        try:
            text, rows = import_preview(path, ctx.visible_namespace(request, ns), ctx.runtime.store,
                                        max_text_chars=self.max_text_chars)
        except ImportFileError as exc:
            ctx.files.discard(path)  # a file that cannot be imported is of no further use
            return problem(exc) + " Nothing was imported.", [], gr.Radio(visible=False)
        except KNOWN_ERRORS as exc:
            return problem(exc) + " Nothing was imported.", [], gr.Radio(visible=False)
        return text, rows, gr.Radio(visible=any(row[-1] == ALREADY_HERE for row in rows))

    def apply_import(self, ns, path: str | None, choice: str, request: gr.Request) -> str:
        if not path:
            return "Choose an export file first."
        if not self.own_upload(path, request):
            return NOT_AN_UPLOAD
        ctx = self.ctx
        space = ctx.visible_namespace(request, ns)
        try:
            ctx.require_writable()
            outcome = ctx.runtime.store.import_file(space, path, actor=f"import:{ctx.user_of(request)}",
                                                    existing=EXISTING_CHOICES.get(choice, "skip"),
                                                    max_text_chars=self.max_text_chars)
        except ImportFileError as exc:
            ctx.files.discard(path)
            return problem(exc) + " Nothing was imported."
        except KNOWN_ERRORS as exc:
            return problem(exc) + " Nothing was imported."
        return import_message(outcome, space)  # the file stays for another choice; the cache's sweep takes it
