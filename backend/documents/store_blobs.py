"""A scope's stored content, keyed by its hash (backend.documents.store): the file as added, its
passages and BM25 tokens, and their vectors for the current embedder, each written atomically; read
back through a cache, embedded again for another embedder, and dropped once no file refers to it."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backend.documents.index import normalized
from backend.documents.passages import DocPassage
from backend.documents.store_records import META_KEYS
from backend.tools.text_ranking import tokenize

PARSER_VERSION = 1
EMBED_CHUNK = 256  # passages per embedder call (the model batches by 64 inside); progress between chunks


@dataclass
class Content:
    meta: dict
    passages: list[DocPassage]
    tokens: list[list[str]]
    vectors: np.ndarray | None


@dataclass
class Blob:
    passages: list[DocPassage]
    tokens: list[list[str]]
    vectors: np.ndarray | None


class ContentBlobs:
    """Part of DocumentStore, which sets `embedder`, `embedder_id()` and `_blob_cache`, and whose
    StoreLayout gives `_manifests`, `_load_manifest` and `_files`."""

    def _store_content(self, scope: Path, sha: str, original: Path, content: Content) -> None:
        """Write one file's blob: its bytes, passages and tokens, vectors (under the scope's lock)."""
        blobs = scope / "blobs"
        blobs.mkdir(parents=True, exist_ok=True)
        kept = blobs / f"{sha}.orig"
        if original.resolve() != kept.resolve():
            _copy_atomically(original, kept)
        if content.vectors is not None:
            _save_atomically(blobs / f"{sha}.{self.embedder_id()}.npy", content.vectors)
        rows = {"parser": PARSER_VERSION, **content.meta, "passages": [p.to_dict() for p in content.passages],
                "tokens": content.tokens}
        _write_atomically(blobs / f"{sha}.json", json.dumps(rows, ensure_ascii=False))

    def _embed(self, texts: list[str], progress: Callable[[float], None]) -> np.ndarray | None:
        if self.embedder is None:
            return None
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        chunks = []
        for start in range(0, len(texts), EMBED_CHUNK):
            chunks.append(normalized(self.embedder.encode(texts[start:start + EMBED_CHUNK])))
            progress(min(1.0, (start + EMBED_CHUNK) / len(texts)))
        return np.ascontiguousarray(np.concatenate(chunks), dtype=np.float32)

    def _load_blob(self, scope: Path, sha: str) -> dict | None:
        """The manifest fields of content already indexed in this scope (with its vectors for the
        current embedder, if there is one), or None."""
        blobs = scope / "blobs"
        path = blobs / f"{sha}.json"
        if not path.is_file() or not (blobs / f"{sha}.orig").is_file():
            return None
        if self.embedder is not None and not (blobs / f"{sha}.{self.embedder_id()}.npy").is_file():
            return None
        try:
            content = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(content, dict) or not isinstance(content.get("passages"), list):
            return None
        # The blob keeps the passages themselves under "passages"; a manifest row keeps their count.
        return {**{key: content[key] for key in META_KEYS if key in content}, "passages": len(content["passages"])}

    def _blob(self, scope: Path, sha: str) -> Blob:
        path = scope / "blobs" / f"{sha}.json"
        stamp = path.stat().st_mtime_ns
        key = (str(scope), sha)
        cached = self._blob_cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        content = json.loads(path.read_text(encoding="utf-8"))
        passages = [DocPassage.from_dict(row) for row in content["passages"]]
        tokens = content.get("tokens") or tokenize([indexed_text(p) for p in passages])
        # One string object per distinct word: at 100,000 passages the tokens would otherwise take GBs.
        blob = Blob(passages, [[sys.intern(token) for token in row] for row in tokens], None)
        if self.embedder is not None:
            vectors_path = scope / "blobs" / f"{sha}.{self.embedder_id()}.npy"
            try:
                vectors = np.load(vectors_path)
            except (OSError, ValueError):
                vectors = None
            if vectors is None or len(vectors) != len(passages):  # added without an embedder, or another one
                vectors = self._embed([p.text for p in passages], lambda _: None)
                _save_atomically(vectors_path, vectors)
            blob.vectors = vectors
        self._blob_cache[key] = (stamp, blob)
        return blob

    def _collect_garbage(self, scope: Path) -> None:
        """Drop stored content no file of the scope refers to any more (under the scope's lock). While
        a manifest of the scope is damaged, what it refers to is unknown: everything is kept, so that
        a good copy of it put back finds its content."""
        if any(self._load_manifest(path)[1] for _, path in self._manifests(scope)):
            return
        referenced = {info.sha256 for info in self._files(scope, False)}
        blobs = scope / "blobs"
        if not blobs.is_dir():
            return
        for entry in blobs.iterdir():
            if entry.name.startswith("."):  # a write in progress, or one a crash left (gone after an hour)
                if time.time() - entry.stat().st_mtime > 3600:
                    entry.unlink(missing_ok=True)
            elif entry.name.split(".", 1)[0] not in referenced:
                entry.unlink(missing_ok=True)


def indexed_text(passage: DocPassage) -> str:
    """What BM25 and the embedder read: the passage under its heading (as the wiki's 'Title. text')."""
    return f"{passage.heading}. {passage.text}" if passage.heading else passage.text


def _copy_atomically(source: Path, target: Path) -> None:
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    shutil.copyfile(source, temporary)
    os.replace(temporary, target)


def _write_atomically(target: Path, text: str) -> None:
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)


def _save_atomically(target: Path, vectors: np.ndarray) -> None:
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
    with temporary.open("wb") as handle:
        np.save(handle, vectors)
    os.replace(temporary, target)
