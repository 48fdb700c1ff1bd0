"""Search over the sandbox Wikipedia: BM25 (bm25s), optionally fused with dense retrieval.

The index is built once per corpus fingerprint and cached on disk under
`<cache_dir>/wiki_index/<fingerprint>/`; a build writes into a private temporary folder and renames
it into place, so a crash or a concurrent reader never sees half an index. Dense document
embeddings are cached beside it, one file per embedder (identified by how it embeds a probe text).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Protocol

import bm25s
import numpy as np
from tqdm.auto import tqdm

from backend.tools.base import Passage
from backend.tools.corpus import CorpusFiles, Document, load_documents
from backend.tools.dense_build import build_lock
from backend.tools.page_links import PageLinks
from backend.tools.text_ranking import tokenize

INDEX_FOLDER = "wiki_index"
BM25_FOLDER = "bm25"
DOCUMENTS_FILE = "documents.json"
RRF_CONSTANT = 60  # the usual reciprocal-rank-fusion constant (Cormack et al., 2009)
FUSION_DEPTH = 50  # how many candidates each retriever contributes to the fusion
EMBED_BATCH = 64
EMBEDDER_PROBE = "Embedder identity probe: the quick brown fox jumps over the lazy dog."


class Embedder(Protocol):
    def encode(self, texts: list[str]) -> np.ndarray: ...


@dataclass
class IndexTiming:
    built: bool  # True when this load_or_build call had to build the BM25 index
    bm25_seconds: float  # build or load time of the BM25 part
    dense_built: bool = False
    dense_seconds: float = 0.0


class WikiIndex:
    def __init__(
        self,
        documents: list[Document],
        retriever: bm25s.BM25,
        *,
        embedder: Embedder | None = None,
        document_vectors: np.ndarray | None = None,
        timing: IndexTiming | None = None,
        directory: Path | None = None,
    ) -> None:
        if (embedder is None) != (document_vectors is None):
            raise ValueError("embedder and document_vectors go together: give both for hybrid search, or neither")
        self.documents = documents
        self.retriever = retriever
        self.embedder = embedder
        self.document_vectors = document_vectors
        self.timing = timing
        self.directory = directory
        self.title_lookup = {_title_key(document.title): index for index, document in enumerate(documents)}
        self.dense_progress: float | None = None  # 0..1 while dense vectors are built in the background
        self.dense_error: str | None = None

    @property
    def hybrid(self) -> bool:
        return self.embedder is not None

    def search_mode(self) -> str:
        """Which search answers now, in words for the UI."""
        if self.hybrid:
            return "hybrid (BM25 + dense MiniLM)"
        if self.dense_progress is not None:
            return f"BM25 only while the dense vectors are built in the background ({self.dense_progress:.0%})"
        if self.dense_error:
            return f"BM25 only (building the dense vectors failed: {self.dense_error})"
        return "BM25"

    def build_dense_in_background(self, embedder: Embedder) -> threading.Thread:
        """Embed the corpus on a low-priority thread; BM25 answers meanwhile, hybrid search from when it ends."""
        assert self.directory is not None, "a background build caches its vectors beside the index"
        self.dense_progress = 0.0

        def run() -> None:
            try:
                os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)  # this thread only, on Linux
            except (AttributeError, OSError):
                pass
            try:
                # Another builder (the command line's, another app process) may be embedding: wait for
                # it, then load what it cached.
                with build_lock(self.directory.parents[1], wait=True):
                    vectors, _ = _load_or_embed(self.directory, self.documents, embedder, progress=False,
                                                on_progress=self._set_dense_progress)
                self.document_vectors = vectors
                self.embedder = embedder  # last: `hybrid` turns on only with the vectors in place
            except Exception as exc:  # reported in the UI; BM25 keeps answering
                self.dense_error = f"{type(exc).__name__}: {exc}"
            finally:
                self.dense_progress = None

        thread = threading.Thread(target=run, name="dense-vectors", daemon=True)
        thread.start()
        return thread

    def _set_dense_progress(self, fraction: float) -> None:
        self.dense_progress = fraction

    @classmethod
    def load_or_build(
        cls,
        cache_dir: Path,
        *,
        progress: bool = True,
        files: CorpusFiles | None = None,
        embedder: Embedder | None = None,
        dense_in_background: bool = False,
    ) -> WikiIndex:
        """The index, built on first use. With an embedder: hybrid search; `dense_in_background`
        starts with BM25 alone when the dense vectors are not cached yet and builds them meanwhile."""
        files = files or CorpusFiles.default()
        root = Path(cache_dir) / INDEX_FOLDER
        directory = root / files.fingerprint()
        started = time.perf_counter()
        loaded = _load_bm25(directory)
        built = loaded is None
        if loaded is None:
            _build_bm25(files, directory, progress=progress)
            _remove_other_versions(root, keep=directory)
            loaded = _load_bm25(directory)
            if loaded is None:
                raise RuntimeError(f"the wiki index just built in {directory} cannot be read back")
        documents, retriever = loaded
        timing = IndexTiming(built=built, bm25_seconds=time.perf_counter() - started)
        vectors = None
        if embedder is not None and dense_in_background and not _dense_path(directory, embedder).is_file():
            index = cls(documents, retriever, timing=timing, directory=directory)
            index.build_dense_in_background(embedder)
            return index
        if embedder is not None:
            started = time.perf_counter()
            vectors, timing.dense_built = _load_or_embed(directory, documents, embedder, progress=progress)
            timing.dense_seconds = time.perf_counter() - started
        return cls(
            documents, retriever, embedder=embedder, document_vectors=vectors, timing=timing, directory=directory
        )

    @cached_property
    def page_links(self) -> PageLinks:
        """Which of the wiki's titles a text names (backend.tools.page_links)."""
        return PageLinks(document.title for document in self.documents)

    def document(self, title: str) -> Document | None:
        """The wiki's article titled `title` (case and surrounding quotes aside), or None."""
        index = self.title_lookup.get(_title_key(title))
        return None if index is None else self.documents[index]

    def search(self, query_list: list[str], k: int = 3) -> list[list[Passage]]:
        """The best `k` passages for each query (BM25, or BM25 fused with dense retrieval)."""
        k = min(k, len(self.documents))
        bm25_rankings = [self._bm25_ranking(query, FUSION_DEPTH if self.hybrid else k) for query in query_list]
        if not self.hybrid:
            return [[self._passage(index, score) for index, score in ranking] for ranking in bm25_rankings]
        dense_rankings = self._dense_rankings(query_list, FUSION_DEPTH)
        return [
            [self._passage(index, score) for index, score in reciprocal_rank_fusion([bm25, dense])[:k]]
            for bm25, dense in zip(bm25_rankings, dense_rankings, strict=True)
        ]

    def _bm25_ranking(self, query: str, depth: int) -> list[tuple[int, float]]:
        """BM25 order, except that a query naming a title exactly gets that document first.

        Titles such as "I Will Not Say Goodbye" are mostly stop words, which BM25 cannot see.
        """
        known = [token for token in tokenize([query])[0] if token in self.retriever.vocab_dict]
        ranking = _top(self.retriever.get_scores(known), depth) if known else []
        exact = self.title_lookup.get(_title_key(query))
        if exact is None:
            return ranking
        best = max([score for _, score in ranking], default=0.0)
        return [(exact, best + 1.0)] + [(index, score) for index, score in ranking if index != exact][: depth - 1]

    def _dense_rankings(self, query_list: list[str], depth: int) -> list[list[tuple[int, float]]]:
        assert self.embedder is not None and self.document_vectors is not None
        query_vectors = _normalized(self.embedder.encode(list(query_list)))
        similarities = query_vectors @ self.document_vectors.T
        return [_top(row, depth, positive_only=False) for row in similarities]

    def _passage(self, index: int, score: float) -> Passage:
        document = self.documents[index]
        return Passage(title=document.title, text=document.text, source=document.source, score=float(score))


def reciprocal_rank_fusion(rankings: list[list[tuple[int, float]]]) -> list[tuple[int, float]]:
    """Fuse rankings of (document, score) by sum of 1 / (60 + rank); ties keep first-seen order."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, (index, _) in enumerate(ranking, start=1):
            fused[index] = fused.get(index, 0.0) + 1.0 / (RRF_CONSTANT + rank)
    return sorted(fused.items(), key=lambda item: -item[1])


def _title_key(text: str) -> str:
    return " ".join(text.casefold().strip(" \t\n\"'“”‘’.?!").split())


def _top(scores: np.ndarray, depth: int, *, positive_only: bool = True) -> list[tuple[int, float]]:
    depth = min(depth, len(scores))
    candidates = np.argpartition(-scores, depth - 1)[:depth]
    order = candidates[np.argsort(-scores[candidates], kind="stable")]
    return [(int(i), float(scores[i])) for i in order if not positive_only or scores[i] > 0]


def _normalized(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def bm25_retriever(documents: list[Document], *, progress: bool = False) -> bm25s.BM25:
    """BM25 over each document's title and text, as the wiki is searched."""
    texts = [f"{document.title}. {document.text}" for document in documents]
    tokens: list[list[str]] = []
    chunk = 1000
    with tqdm(total=len(texts), desc="Tokenising sandbox wiki", unit="doc", disable=not progress) as bar:
        for start in range(0, len(texts), chunk):
            tokens += tokenize(texts[start : start + chunk])
            bar.update(len(texts[start : start + chunk]))
    retriever = bm25s.BM25()
    retriever.index(tokens, show_progress=progress)
    return retriever


def _build_bm25(files: CorpusFiles, directory: Path, *, progress: bool) -> None:
    documents = load_documents(files)
    retriever = bm25_retriever(documents, progress=progress)

    building = directory.parent / f".building-{directory.name}-{uuid.uuid4().hex[:8]}"
    building.mkdir(parents=True)
    try:
        retriever.save(str(building / BM25_FOLDER), show_progress=False)
        rows = [[document.title, document.text, document.source] for document in documents]
        (building / DOCUMENTS_FILE).write_text(json.dumps(rows, ensure_ascii=False), encoding="utf-8")
        try:
            building.rename(directory)
        except OSError:
            if not directory.is_dir():  # otherwise another process finished the same build first
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)


def _load_bm25(directory: Path) -> tuple[list[Document], bm25s.BM25] | None:
    if not directory.is_dir():
        return None
    try:
        rows = json.loads((directory / DOCUMENTS_FILE).read_text(encoding="utf-8"))
        retriever = bm25s.BM25.load(str(directory / BM25_FOLDER), load_vocab=True, show_progress=False)
    except (OSError, ValueError, KeyError):
        shutil.rmtree(directory, ignore_errors=True)  # damaged (e.g. edited by hand): rebuild it
        return None
    return [Document(title, text, source) for title, text, source in rows], retriever


def _remove_other_versions(root: Path, *, keep: Path) -> None:
    """Drop indexes of older corpora, and build folders left by a crash (untouched for an hour)."""
    for entry in root.iterdir():
        building = entry.name.startswith(".building-")
        if entry.is_dir() and entry != keep and (not building or time.time() - entry.stat().st_mtime > 3600):
            shutil.rmtree(entry, ignore_errors=True)


def embedder_fingerprint(embedder: Embedder) -> str:
    probe = _normalized(embedder.encode([EMBEDDER_PROBE]))
    return hashlib.sha256(np.round(probe, 3).tobytes() + str(probe.shape).encode()).hexdigest()[:12]


def dense_vectors_cached(cache_dir: Path, embedder: Embedder, files: CorpusFiles | None = None) -> bool:
    """Whether the corpus's dense vectors for `embedder` are already built under `cache_dir`."""
    directory = Path(cache_dir) / INDEX_FOLDER / (files or CorpusFiles.default()).fingerprint()
    return _dense_path(directory, embedder).is_file()


def _dense_path(directory: Path, embedder: Embedder) -> Path:
    return directory / f"dense-{embedder_fingerprint(embedder)}.npy"


def _load_or_embed(
    directory: Path, documents: list[Document], embedder: Embedder, *, progress: bool,
    on_progress: Callable[[float], None] | None = None,
) -> tuple[np.ndarray, bool]:
    path = _dense_path(directory, embedder)
    if path.is_file():
        vectors = np.load(path)
        if vectors.shape[0] == len(documents):
            return vectors, False
    texts = [f"{document.title}: {document.text}" for document in documents]
    batches = []
    for start in tqdm(
        range(0, len(texts), EMBED_BATCH), desc="Embedding sandbox wiki", unit="batch", disable=not progress
    ):
        batches.append(_normalized(embedder.encode(texts[start : start + EMBED_BATCH])))
        if on_progress is not None:
            on_progress(min(1.0, (start + EMBED_BATCH) / len(texts)))
    vectors = np.concatenate(batches)
    temporary = path.with_suffix(f".{uuid.uuid4().hex[:8]}.tmp")
    with temporary.open("wb") as handle:
        np.save(handle, vectors)
    os.replace(temporary, path)
    return vectors, True
