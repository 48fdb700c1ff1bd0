"""Reading the document store (backend.documents.store): the passages at a `doc://` locator, the
stored file it points at, and search over one reader's in-memory index of everything they may read,
rebuilt when a manifest changed (also one another process changed)."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from backend.documents.errors import DocumentError
from backend.documents.index import DocumentIndex, IndexedPassage
from backend.documents.naming import SHARED, Locator
from backend.documents.store_records import row_sha
from backend.tools.base import Passage

log = logging.getLogger("backend.documents.store")  # the store's one logger, whichever part logs

MAX_CACHED_INDEXES = 16  # readers whose index stays in memory


class DocumentReading:
    """Part of DocumentStore, which sets `embedder`, `_lock`, `_indexes` and `_build_locks`, and whose
    StoreLayout and ContentBlobs give the manifests and stored content."""


    def _located(self, namespace: str, locator: str) -> tuple[Locator, Path, str]:
        """A locator's place, the scope it is in and its file's content hash, if `namespace` may read it."""
        place = Locator.parse(locator)
        scope = self._scope_dir(namespace, place.shared)
        rows = self._read_manifest(self._collection_dir(scope, place.collection) / "manifest.json")["files"]
        if place.file not in rows:
            raise DocumentError(f"No document {place.file!r} in collection {place.collection!r} is yours to read.")
        sha = row_sha(rows[place.file])
        if not sha:
            raise DocumentError(f"The record of {place.file!r} is damaged; remove it and add the file again.")
        return place, scope, sha

    def source(self, namespace: str, locator: str) -> tuple[Path, str]:
        """The stored file a passage's locator points at, if `namespace` may read it: (path, name)."""
        place, scope, sha = self._located(namespace, locator)
        return scope / "blobs" / f"{sha}.orig", place.file

    def passages_at(self, namespace: str, locator: str) -> list[Passage]:
        """The passages at a locator's place (its page or section; the whole file without one)."""
        place, scope, sha = self._located(namespace, locator)
        blob = self._blob(scope, sha)
        chosen = [p for p in blob.passages if (place.page is None or p.page == place.page)
                  and (place.section is None or p.heading == place.section)]
        return [self._passage(IndexedPassage(place.collection, place.shared, place.file, p), 1.0) for p in chosen]

    def _state(self, namespace: str) -> tuple:
        """What a reader's index is built from: each visible manifest's identity and change time."""
        stamps = []
        for shared in (False, True):
            for name, path in self._manifests(self._scope_dir(namespace, shared)):
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                stamps.append((shared, name, stat.st_ino, stat.st_mtime_ns, stat.st_size))
        return (self.embedder_id(), tuple(stamps))

    def index_for(self, namespace: str) -> DocumentIndex:
        """The in-memory index of everything `namespace` reads, rebuilt when a manifest changed
        (also one changed by another process, e.g. `python -m app index`)."""
        state = self._state(namespace)
        with self._lock:
            cached = self._indexes.get(namespace)
            if cached is not None and cached[0] == state:
                self._indexes.move_to_end(namespace)
                return cached[1]
            build_lock = self._build_locks.setdefault(namespace, threading.Lock())
        with build_lock:
            with self._lock:
                cached = self._indexes.get(namespace)
                if cached is not None and cached[0] == state:
                    return cached[1]
            index = self._build_index(namespace)
            with self._lock:
                self._indexes[namespace] = (state, index)
                self._indexes.move_to_end(namespace)
                while len(self._indexes) > MAX_CACHED_INDEXES:
                    self._indexes.popitem(last=False)
            return index

    def _build_index(self, namespace: str) -> DocumentIndex:
        entries: list[IndexedPassage] = []
        tokens: list[list[str]] = []
        vectors: list[np.ndarray] = []
        for collection in self.collections(namespace):
            scope = self._scope_dir(namespace, collection.shared)
            for info in collection.files:
                try:
                    blob = self._blob(scope, info.sha256)
                except (OSError, ValueError, KeyError) as exc:
                    log.warning("document %s/%s cannot be read: %s", collection.label, info.name, exc)
                    continue
                entries += [IndexedPassage(collection.name, collection.shared, info.name, p) for p in blob.passages]
                tokens += blob.tokens
                if blob.vectors is not None:
                    vectors.append(blob.vectors)
        matrix = None
        if self.embedder is not None:
            matrix = np.ascontiguousarray(np.concatenate(vectors), dtype=np.float32) if vectors else np.zeros((0, 384), np.float32)
        return DocumentIndex(entries, tokens, matrix, self.embedder)

    def search(self, namespace: str, query_list: list[str], k: int) -> list[list[tuple[Passage, float | None]]]:
        """Per query, the best `k` passages `namespace` may read, each with its cosine similarity to
        the query (None without an embedder); [] for a query nothing matches."""
        index = self.index_for(namespace)
        return [[(self._passage(hit.entry, hit.score), hit.similarity) for hit in hits]
                for hits in index.search(query_list, k)]

    @staticmethod
    def _passage(entry: IndexedPassage, score: float) -> Passage:
        label = f"{SHARED}/{entry.collection}" if entry.shared else entry.collection
        return Passage(title=entry.passage.title(entry.file), text=entry.passage.text, source=f"doc:{label}",
                       score=float(score), url=entry.passage.locator(entry.collection, entry.file, shared=entry.shared))
