"""The analysts' own documents: collections of files per namespace, kept on disk and searched.

Layout under `root` (the config's `<data_dir>/documents`), one folder per scope (a namespace's own
`ns-<name>`, or `shared` for the collections every namespace reads):

    <scope>/collections/<collection>/manifest.json   the collection's files: name -> content hash, counts
    <scope>/blobs/<sha256>.orig                      the file as added (re-indexing reads it again)
    <scope>/blobs/<sha256>.json                      its passages (text, page / heading, OCR) and BM25 tokens
    <scope>/blobs/<sha256>.<embedder>.npy            their MiniLM vectors

Content is keyed by its hash: adding a file whose bytes the scope already holds reuses its passages
and vectors (no parsing, no embedding), whatever its name or collection. Every method takes the
caller's namespace and touches only that namespace's scope (or, with `shared=True`, which only an
admin's caller may pass, the shared one); names from a form or a file are cleaned by
backend.documents.naming. A file is parsed in a child process under the documents budget
(backend.documents.parse_process). Writes hold a per-scope file lock (the app and `python -m app
index` may write at once; the quota is checked under it); manifests are replaced atomically, so a
reader never sees half of one. A damaged manifest row is still listed and can be removed; a manifest
that cannot be read at all is listed as its collection with a note naming it, and the collection can
be removed.

One idea per module: `store_layout` (scope folders, the lock, manifests), `store_blobs` (content by
hash), `store_adding` (adding and re-indexing files), `store_reading` (locators and search),
`store_removal`, `store_records` (what is kept of a file and reported), `read_turns` (a user's
reading slots). DocumentStore puts them together.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from backend.config import DocumentsConfig
from backend.documents.index import DocumentIndex
from backend.documents.read_turns import ReadTurns
from backend.documents.store_adding import DocumentAdding
from backend.documents.store_blobs import Blob, ContentBlobs
from backend.documents.store_layout import StoreLayout
from backend.documents.store_reading import DocumentReading
from backend.documents.store_records import CollectionInfo, DocumentLimits, file_info
from backend.documents.store_removal import DocumentRemoval
from backend.tools.wiki_index import Embedder, embedder_fingerprint


class DocumentStore(DocumentAdding, DocumentReading, DocumentRemoval, ContentBlobs, StoreLayout):
    def __init__(self, root: Path, *, embedder: Embedder | None = None, limits: DocumentLimits | None = None,
                 budget: DocumentsConfig | None = None) -> None:
        self.root = Path(root)
        self.embedder = embedder
        self.limits = limits or DocumentLimits()
        self.budget = budget or DocumentsConfig()  # what reading one file may cost (backend.documents.budget)
        self._fingerprint: str | None = None
        self._indexes: OrderedDict[str, tuple[tuple, DocumentIndex]] = OrderedDict()
        self._blob_cache: dict[tuple[str, str], tuple[int, Blob]] = {}
        self._lock = threading.Lock()
        self._build_locks: dict[str, threading.Lock] = {}
        self._read_turns: dict[str, ReadTurns] = {}

    def embedder_id(self) -> str | None:
        if self.embedder is None:
            return None
        if self._fingerprint is None:
            self._fingerprint = embedder_fingerprint(self.embedder)
        return self._fingerprint

    def collections(self, namespace: str) -> list[CollectionInfo]:
        """What `namespace` may see: its own collections, then the shared ones; a collection whose
        manifest is damaged has no files and says so in `problem`."""
        found = []
        for shared in (False, True):
            for name, path in self._manifests(self._scope_dir(namespace, shared)):
                manifest, problem = self._load_manifest(path)
                files = [file_info(name, shared, file, row) for file, row in sorted(manifest["files"].items())]
                if files or problem:
                    found.append(CollectionInfo(name, shared, files, problem))
        return found

    def has_documents(self, namespace: str) -> bool:
        """Whether `namespace` reads any document (a collection exists only while it has files)."""
        return any(path.is_file() for shared in (False, True)
                   for _, path in self._manifests(self._scope_dir(namespace, shared)))
