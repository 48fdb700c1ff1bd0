"""The Documents view: the analyst's own files (PDF, Markdown, text, HTML, DOCX), which the `search`
tool reads beside the wiki for that analyst's questions.

It lists the collections the caller reads (their own, then the shared ones) with each file's
passages, size and when it was added; adds uploaded files or a folder with progress; removes and
re-indexes files; opens the file a passage's `doc://` locator points at; and says whether OCR is on.
Every write goes into the caller's own namespace (`ctx.namespace_of`), never one named by a form;
only an admin (or the single local user) writes shared collections. The functions below are what the
view's buttons call (the tests call them the same way).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import gradio as gr

from app.escaping import escape_markdown
from app.session import AppContext, ReadOnlyModeError
from backend.documents import DocumentError, ocr_available, ocr_status, supported_suffixes
from backend.documents.naming import SHARED
from backend.documents.store import DocumentStore
from backend.documents.store_records import AddReport, CollectionInfo, FileInfo

log = logging.getLogger(__name__)

COLUMNS = ["collection", "file", "format", "passages", "pages", "OCR pages", "size", "added", "notes"]
WHOLE_COLLECTION = "(the whole collection)"
DEFAULT_COLLECTION = "documents"
NO_STORE = "⚠️ Documents are not available in this app: it was started without a document store."
KNOWN_ERRORS = (DocumentError, ReadOnlyModeError, OSError)


def _problem(exc: Exception) -> str:
    return f"⚠️ {escape_markdown(exc)}"


def _size(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def _when(epoch: float) -> str:
    return datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M") if epoch else ""


def _notes(info: FileInfo) -> str:
    notes = list(info.warnings)
    if info.unread_pages:
        pages = ", ".join(map(str, info.unread_pages[:8])) + (" …" if len(info.unread_pages) > 8 else "")
        if not info.ocr_on:
            notes.append(f"image-only pages not read, OCR was off (p. {pages})"
                         + ("; re-index to read them now" if ocr_available() else ""))
        else:
            notes.append(f"OCR read nothing on p. {pages}")
    return "; ".join(notes)


def _store(ctx: AppContext) -> DocumentStore | None:
    return getattr(ctx.runtime, "documents", None)


def _may_share(ctx: AppContext, request: gr.Request | None) -> bool:
    return not ctx.read_only and ctx.is_admin(request)


def _scope(ctx: AppContext, request: gr.Request | None, label: str | None) -> tuple[str, bool]:
    """A collection chosen in the form: (its name, whether it is shared). Changing a shared one
    needs an admin; the namespace is always the caller's."""
    label = (label or "").strip()
    shared = label.startswith(f"{SHARED}/")
    name = label[len(SHARED) + 1:] if shared else label
    if shared and not _may_share(ctx, request):
        raise DocumentError("Only an admin can change a shared collection.")
    return name, shared


# -- what the view shows ---------------------------------------------------------------------------
def status_markdown(ctx: AppContext, request: gr.Request | None) -> str:
    store = _store(ctx)
    if store is None:
        return NO_STORE
    namespace = ctx.namespace_of(request)
    collections = store.collections(namespace)
    files = sum(len(c.files) for c in collections)
    passages = sum(f.passages for c in collections for f in c.files)
    limits, budget = store.limits, store.budget
    lines = [
        f"**{files} files, {passages} passages** in {len(collections)} collections that your questions' "
        f"`search` reads beside the wiki (namespace `{escape_markdown(namespace)}`"
        + (", and the shared collections every user reads" if any(c.shared for c in collections) else "") + ").",
        f"**{escape_markdown(ocr_status())}**",
        f"Formats: {', '.join(supported_suffixes())}; at most {_size(limits.max_file_bytes)} a file and "
        f"{_size(limits.max_namespace_bytes)} in all. Adding a file already indexed costs nothing: its "
        "passages are kept by the file's content.",
        f"Reading one file may take at most {budget.max_seconds:g} s and {budget.max_memory_mb:,} MB of memory, "
        f"{budget.max_pages:,} PDF pages, {budget.max_ocr_calls:,} images read by OCR and "
        f"{budget.max_passages:,} passages; a file that needs more is refused and says which limit.",
    ]
    lines += [f"⚠️ The collection **{escape_markdown(c.label)}** is not searched: {escape_markdown(c.problem)}."
              for c in collections if c.problem]
    if ctx.users is not None:
        lines.append("Your documents are yours alone: no other user's search, list or citations show them."
                     + (" As an admin you can also add shared collections." if _may_share(ctx, request) else ""))
    if ctx.read_only:
        lines.append("**Read-only demo**: documents can be searched, not added or removed.")
    return "\n\n".join(lines)


def file_rows(collections: list[CollectionInfo]) -> list[list]:
    """One row a file; a collection whose list of files is damaged, one row saying so."""
    rows = []
    for c in collections:
        if c.problem:
            rows.append([c.label, "", "", 0, "", "", "", "", c.problem])
        rows += [[c.label, f.name, f.format, f.passages, f.pages or "", f.ocr_pages or "", _size(f.bytes),
                  _when(f.added), _notes(f)] for f in c.files]
    return rows


def collection_choices(collections: list[CollectionInfo], *, include_shared: bool) -> list[str]:
    return [c.label for c in collections if include_shared or not c.shared]


def file_choices(ctx: AppContext, request: gr.Request | None, label: str | None) -> list[str]:
    store = _store(ctx)
    if store is None or not label:
        return [WHOLE_COLLECTION]
    found = next((c for c in store.collections(ctx.namespace_of(request)) if c.label == label), None)
    return [WHOLE_COLLECTION] + ([f.name for f in found.files] if found else [])


def load_documents(ctx: AppContext, request: gr.Request | None):
    """(status, table rows, collection choices, file choices, the 'shared' checkbox) on page load."""
    store = _store(ctx)
    if store is None:
        return NO_STORE, [], gr.update(choices=[], value=None), gr.update(choices=[WHOLE_COLLECTION]), gr.update(visible=False)
    collections = store.collections(ctx.namespace_of(request))
    changeable = collection_choices(collections, include_shared=_may_share(ctx, request))
    chosen = changeable[0] if changeable else None
    return (status_markdown(ctx, request), file_rows(collections), gr.update(choices=changeable, value=chosen),
            gr.update(choices=file_choices(ctx, request, chosen), value=WHOLE_COLLECTION),
            gr.update(visible=_may_share(ctx, request), value=False))


# -- what the buttons do ---------------------------------------------------------------------------
def report_markdown(report: AddReport, verb: str = "Added") -> str:
    where = f"{SHARED}/{report.collection}" if report.shared else report.collection
    head = (f"{verb} {len(report.indexed)} files to **{escape_markdown(where)}**"
            + (f", {len(report.unchanged)} unchanged" if report.unchanged else "")
            + (f"; **{len(report.failed)} could not be added**" if report.failed else "") + ".")
    return head + "\n\n" + "\n".join(f"- {escape_markdown(line)}" for line in report.lines())


def add_documents(ctx: AppContext, request: gr.Request | None, paths: list[str] | None, collection: str | None,
                  shared: bool = False, progress: Callable[[float, str], None] | None = None) -> str:
    """Add uploaded files to one of the caller's collections (a shared one for an admin who asks)."""
    store = _store(ctx)
    if store is None:
        return NO_STORE
    paths = [path for path in (paths or []) if path]
    if not paths:
        return "Choose files (or a folder) to add first."
    try:
        ctx.require_writable()
        if shared and not _may_share(ctx, request):
            raise DocumentError("Only an admin can add to a shared collection.")
        files = [(Path(path), Path(path).name) for path in paths]
        report = store.add_files(ctx.namespace_of(request), (collection or "").strip() or DEFAULT_COLLECTION, files,
                                 shared=bool(shared), progress=progress)
    except KNOWN_ERRORS as exc:
        return _problem(exc)
    _warm(store, ctx.namespace_of(request))
    return report_markdown(report)


def _chosen(ctx: AppContext, request: gr.Request | None, label: str | None,
            file: str | None) -> tuple[str, bool, str | None]:
    """What a remove or re-index is about, checked: (collection, shared, one file or None for all of it)."""
    ctx.require_writable()
    name, shared = _scope(ctx, request, label)
    return name, shared, None if not file or file == WHOLE_COLLECTION else file


def remove_documents(ctx: AppContext, request: gr.Request | None, label: str | None, file: str | None) -> str:
    store = _store(ctx)
    if store is None:
        return NO_STORE
    try:
        name, shared, one_file = _chosen(ctx, request, label, file)
        removed = store.remove(ctx.namespace_of(request), name, one_file, shared=shared)
    except KNOWN_ERRORS as exc:
        return _problem(exc)
    what = (f"the collection **{escape_markdown(label)}**" + (f" ({removed} files)" if removed else "")
            if one_file is None else f"**{escape_markdown(file)}** from **{escape_markdown(label)}**")
    return f"Removed {what}; the search no longer reads it."


def reindex_documents(ctx: AppContext, request: gr.Request | None, label: str | None, file: str | None,
                      progress: Callable[[float, str], None] | None = None) -> str:
    store = _store(ctx)
    if store is None:
        return NO_STORE
    try:
        name, shared, one_file = _chosen(ctx, request, label, file)
        report = store.reindex(ctx.namespace_of(request), name, one_file, shared=shared, progress=progress)
    except KNOWN_ERRORS as exc:
        return _problem(exc)
    _warm(store, ctx.namespace_of(request))
    return report_markdown(report, verb="Re-indexed")


def open_source(ctx: AppContext, request: gr.Request | None, locator: str | None) -> tuple[str | None, str]:
    """The file a passage's `doc://` locator points at, copied for the caller alone, and the text
    of the passages at that place; (None, why) when the caller may not read it."""
    store = _store(ctx)
    if store is None:
        return None, NO_STORE
    namespace, user = ctx.namespace_of(request), ctx.user_of(request)
    try:
        path, name = store.source(namespace, locator or "")
        passages = store.passages_at(namespace, locator or "")
        folder = ctx.files.new_folder(user)
        copy = folder / Path(name).name
        shutil.copyfile(path, copy)
        ctx.files.grant(copy, user)  # served to this user alone
    except KNOWN_ERRORS as exc:
        return None, _problem(exc)
    text = "\n\n".join(f"**{escape_markdown(p.title)}**\n\n{escape_markdown(p.text)}" for p in passages[:20])
    return str(copy), text or "(no passages at that place)"


def _warm(store: DocumentStore, namespace: str) -> None:
    """Build the caller's search index now, so their next question does not wait for it."""
    try:
        store.index_for(namespace)
    except Exception:  # the search builds it again when asked, and reports there
        log.exception("building the document index of %s failed", namespace)


def _gradio_progress(progress) -> Callable[[float, str], None]:
    return lambda fraction, text: progress(fraction, desc=text)


# -- the view --------------------------------------------------------------------------------------
def build_documents_tab(ctx: AppContext):
    """Builds the view inside the current Blocks; returns (on_load function, its outputs) for page load."""
    status = gr.Markdown(elem_id="documents-status")
    table = gr.Dataframe(headers=COLUMNS, interactive=False, wrap=True, max_height=420, elem_id="documents-table")
    with gr.Group(elem_classes=["documents-add"]):  # a Group draws its elem_id on two elements (Gradio 6)
        with gr.Row():
            files = gr.File(label="Files to add", file_count="multiple", file_types=supported_suffixes(),
                            type="filepath", elem_id="documents-files")
            folder = gr.File(label="…or a folder", file_count="directory", type="filepath", elem_id="documents-folder")
        with gr.Row():
            collection = gr.Textbox(value=DEFAULT_COLLECTION, label="Collection", elem_id="documents-collection",
                                    scale=3)
            shared = gr.Checkbox(label="Shared with every user (admins)", visible=False, elem_id="documents-shared",
                                 scale=1)
            add = gr.Button("Add to the collection", variant="primary", elem_id="documents-add-button", scale=1)
    with gr.Row(elem_id="documents-manage"):
        chosen = gr.Dropdown(label="Collection", choices=[], elem_id="documents-chosen", scale=2)
        chosen_file = gr.Dropdown(label="File", choices=[WHOLE_COLLECTION], value=WHOLE_COLLECTION,
                                  elem_id="documents-chosen-file", scale=3)
        reindex = gr.Button("Re-index", elem_id="documents-reindex", scale=1)
        remove = gr.Button("Remove", variant="stop", elem_id="documents-remove", scale=1)
    result = gr.Markdown(elem_id="documents-result")
    with gr.Accordion("Open a source (a doc:// link from an answer)", open=False, elem_id="documents-open"):
        with gr.Row():
            locator = gr.Textbox(label="Locator", placeholder="doc://documents/report.pdf#page=3", scale=4,
                                 elem_id="documents-locator")
            open_button = gr.Button("Open", elem_id="documents-open-button", scale=1)
        source_file = gr.File(label="The file", interactive=False, elem_id="documents-source-file")
        source_text = gr.Markdown(elem_id="documents-source-text")

    outputs = [status, table, chosen, chosen_file, shared]

    def on_load(request: gr.Request):
        return load_documents(ctx, request)

    def on_add(paths, folder_paths, name, share, request: gr.Request, progress=gr.Progress()):
        return add_documents(ctx, request, list(paths or []) + list(folder_paths or []), name, share,
                             progress=_gradio_progress(progress))

    def on_reindex(label, file, request: gr.Request, progress=gr.Progress()):
        return reindex_documents(ctx, request, label, file, progress=_gradio_progress(progress))

    def on_remove(label, file, request: gr.Request):
        return remove_documents(ctx, request, label, file)

    def on_choose(label, request: gr.Request):
        return gr.update(choices=file_choices(ctx, request, label), value=WHOLE_COLLECTION)

    def on_open(text, request: gr.Request):
        return open_source(ctx, request, text)

    add.click(on_add, [files, folder, collection, shared], [result]).then(on_load, None, outputs)
    reindex.click(on_reindex, [chosen, chosen_file], [result]).then(on_load, None, outputs)
    remove.click(on_remove, [chosen, chosen_file], [result]).then(on_load, None, outputs)
    chosen.input(on_choose, [chosen], [chosen_file])
    open_button.click(on_open, [locator], [source_file, source_text])
    locator.submit(on_open, [locator], [source_file, source_text])
    return on_load, outputs
