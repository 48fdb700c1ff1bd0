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
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from backend.config import DocumentsConfig
from backend.documents import ocr
from backend.documents.errors import DocumentError
from backend.documents.index import DocumentIndex, IndexedPassage, normalized
from backend.documents.naming import SHARED, Locator, collection_name, file_name, namespace_folder
from backend.documents.parse_process import read_passages
from backend.documents.parsing import ParsedFile, file_format, supported_suffixes
from backend.documents.passages import DocPassage
from backend.tools.base import Passage
from backend.tools.text_ranking import tokenize
from backend.tools.wiki_index import Embedder, embedder_fingerprint

log = logging.getLogger(__name__)

PARSER_VERSION = 1
EMBED_CHUNK = 256  # passages per embedder call (the model batches by 64 inside); progress between chunks
MAX_CACHED_INDEXES = 16  # readers whose index stays in memory
SHARED_FOLDER = "shared"
Progress = Callable[[float, str], None]


class ReadTurns:
    """A user's reading slots: at most `slots` reads at once, the others wait in arrival order."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._changed = threading.Condition()
        self._queue: list[object] = []  # the waiting, in arrival order
        self._reading = 0

    @contextmanager
    def turn(self, on_wait) -> Iterator[None]:
        """Waits for a slot, calling `on_wait(reads ahead of this one)` when it must wait and whenever
        its place changes."""
        me = object()
        with self._changed:
            self._queue.append(me)
            told = None
            while self._queue[0] is not me or self._reading >= self.slots:
                ahead = self._queue.index(me) + self._reading
                if ahead != told:
                    on_wait(ahead)
                    told = ahead
                self._changed.wait()
            self._queue.pop(0)
            self._reading += 1
            self._changed.notify_all()  # the next in line starts too while slots remain
        try:
            yield
        finally:
            with self._changed:
                self._reading -= 1
                self._changed.notify_all()


@dataclass(frozen=True)
class DocumentLimits:
    max_file_bytes: int = 50_000_000
    max_namespace_bytes: int = 2_000_000_000  # all of a namespace's files together (the shared scope's too)


@dataclass
class FileInfo:
    collection: str
    shared: bool
    name: str
    sha256: str
    bytes: int
    format: str
    added: float
    indexed: float
    passages: int
    pages: int = 0
    ocr_pages: int = 0
    unread_pages: list[int] = field(default_factory=list)  # image-only pages not read (OCR off, or nothing read)
    ocr_on: bool = False
    warnings: list[str] = field(default_factory=list)

    def row(self) -> dict:
        row = asdict(self)
        del row["collection"], row["shared"], row["name"]
        return row


@dataclass
class CollectionInfo:
    name: str
    shared: bool
    files: list[FileInfo]
    problem: str = ""  # its manifest cannot be read: what is wrong and what to do (then `files` is empty)

    @property
    def label(self) -> str:
        return f"{SHARED}/{self.name}" if self.shared else self.name


@dataclass
class AddReport:
    collection: str
    shared: bool
    added: list[FileInfo] = field(default_factory=list)  # parsed and embedded now
    reused: list[FileInfo] = field(default_factory=list)  # bytes already indexed in this scope: nothing re-embedded
    unchanged: list[str] = field(default_factory=list)  # the same name with the same bytes was already there
    failed: list[tuple[str, str]] = field(default_factory=list)  # (name, why)
    skipped: list[str] = field(default_factory=list)  # files of other types found in a folder

    @property
    def indexed(self) -> list[FileInfo]:
        return self.added + self.reused

    def lines(self) -> list[str]:
        where = f"{SHARED}/{self.collection}" if self.shared else self.collection
        lines = [f"{info.name}: {info.passages} passage{'' if info.passages == 1 else 's'}" + _pages_note(info) + (" (already indexed: reused)" if info in self.reused else "")
                 for info in self.indexed]
        lines += [f"{name}: unchanged (already in {where})" for name in self.unchanged]
        lines += [f"FAILED {name}: {why}" for name, why in self.failed]
        if self.skipped:
            lines.append(f"skipped {len(self.skipped)} files of other types: {', '.join(self.skipped[:10])}"
                         + (" …" if len(self.skipped) > 10 else ""))
        return lines


def _pages_note(info: FileInfo) -> str:
    parts = []
    if info.pages:
        parts.append(f"{info.pages} pages")
    if info.ocr_pages:
        parts.append(f"{info.ocr_pages} read by OCR")
    if info.unread_pages:
        why = "OCR is off" if not info.ocr_on else "OCR read nothing"
        parts.append(f"{len(info.unread_pages)} image-only pages not read ({why})")
    return f" ({', '.join(parts)})" if parts else ""


@dataclass
class _Content:
    meta: dict
    passages: list[DocPassage]
    tokens: list[list[str]]
    vectors: np.ndarray | None


@dataclass
class _Blob:
    passages: list[DocPassage]
    tokens: list[list[str]]
    vectors: np.ndarray | None


class DocumentStore:
    def __init__(self, root: Path, *, embedder: Embedder | None = None, limits: DocumentLimits | None = None,
                 budget: DocumentsConfig | None = None) -> None:
        self.root = Path(root)
        self.embedder = embedder
        self.limits = limits or DocumentLimits()
        self.budget = budget or DocumentsConfig()  # what reading one file may cost (backend.documents.budget)
        self._fingerprint: str | None = None
        self._indexes: OrderedDict[str, tuple[tuple, DocumentIndex]] = OrderedDict()
        self._blob_cache: dict[tuple[str, str], tuple[int, _Blob]] = {}
        self._lock = threading.Lock()
        self._build_locks: dict[str, threading.Lock] = {}
        self._read_turns: dict[str, ReadTurns] = {}

    # -- scopes ----------------------------------------------------------------------------------
    def _scope_dir(self, namespace: str, shared: bool) -> Path:
        return self.root / (SHARED_FOLDER if shared else namespace_folder(namespace))

    def _collection_dir(self, scope: Path, collection: str) -> Path:
        return scope / "collections" / collection

    @contextmanager
    def _writing(self, scope: Path) -> Iterator[None]:
        scope.mkdir(parents=True, exist_ok=True)
        with (scope / ".lock").open("a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def embedder_id(self) -> str | None:
        if self.embedder is None:
            return None
        if self._fingerprint is None:
            self._fingerprint = embedder_fingerprint(self.embedder)
        return self._fingerprint

    # -- manifests -------------------------------------------------------------------------------
    def _manifests(self, scope: Path) -> list[tuple[str, Path]]:
        folder = scope / "collections"
        try:
            entries = sorted(os.scandir(folder), key=lambda entry: entry.name)
        except FileNotFoundError:
            return []
        return [(entry.name, Path(entry.path) / "manifest.json") for entry in entries
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".")]

    def _read_manifest(self, path: Path) -> dict:
        return self._load_manifest(path)[0]

    def _load_manifest(self, path: Path) -> tuple[dict, str]:
        """The manifest at `path` (no files when it is missing or damaged) and, when it is damaged, a
        sentence naming it and what to do."""
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {"files": {}}, ""
        except json.JSONDecodeError as exc:
            why = f"it is not valid JSON at line {exc.lineno}, column {exc.colno}"
        except UnicodeDecodeError:
            why = "it is not UTF-8 text"
        except OSError as exc:
            why = f"it cannot be read ({exc.strerror or type(exc).__name__})"
        else:
            if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict):
                return manifest, ""
            why = "it holds no table of files"
        log.warning("document manifest %s is damaged: %s", path, why)
        where = path.relative_to(self.root.parent) if path.is_relative_to(self.root.parent) else path
        return {"files": {}}, (f"the list of its files ({where} in the data folder) is damaged: {why}; remove the "
                               "collection and add its files again, or put back a good copy of that file")

    def _write_manifest(self, path: Path, manifest: dict) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".manifest.{uuid.uuid4().hex[:8]}.tmp")
        temporary.write_text(json.dumps(manifest, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(temporary, path)

    def _files(self, scope: Path, shared: bool) -> Iterator[FileInfo]:
        """Every file of the scope's collections, by collection and name."""
        for collection, path in self._manifests(scope):
            for name, row in sorted(self._read_manifest(path)["files"].items()):
                yield _file_info(collection, shared, name, row)

    def _check_quota(self, scope: Path, sha: str, size: int) -> None:
        """Refuse content that would take the scope past its quota (bytes it already holds are free)."""
        stored = {info.sha256: info.bytes for info in self._files(scope, False)}
        used = sum(stored.values())
        if sha not in stored and used + size > self.limits.max_namespace_bytes:
            raise DocumentError(f"the documents here already take {_amount(used)} of the "
                                f"{_amount(self.limits.max_namespace_bytes)} allowed "
                                "(app.max_namespace_document_bytes in mia.toml); remove some first")

    # -- listing ---------------------------------------------------------------------------------
    def collections(self, namespace: str) -> list[CollectionInfo]:
        """What `namespace` may see: its own collections, then the shared ones; a collection whose
        manifest is damaged has no files and says so in `problem`."""
        found = []
        for shared in (False, True):
            for name, path in self._manifests(self._scope_dir(namespace, shared)):
                manifest, problem = self._load_manifest(path)
                files = [_file_info(name, shared, file, row) for file, row in sorted(manifest["files"].items())]
                if files or problem:
                    found.append(CollectionInfo(name, shared, files, problem))
        return found

    def has_documents(self, namespace: str) -> bool:
        """Whether `namespace` reads any document (a collection exists only while it has files)."""
        return any(path.is_file() for shared in (False, True)
                   for _, path in self._manifests(self._scope_dir(namespace, shared)))

    # -- adding ----------------------------------------------------------------------------------
    @contextmanager
    def _reading_turn(self, namespace: str, progress: Progress | None) -> Iterator[None]:
        """One of the caller's `documents.reads_per_user` reading slots: a user's further adds wait
        their turn (their place in the progress text), so one user's large files never take every
        reading process while other users' requests wait."""
        with self._lock:
            turns = self._read_turns.setdefault(namespace, ReadTurns(self.budget.reads_per_user))
        with turns.turn(lambda ahead: progress(0.0, f"waiting: {ahead} of your reads ahead of this one")
                        if progress is not None else None):
            yield

    def add_files(self, namespace: str, collection: str, files: Iterable[tuple[Path, str]], *, shared: bool = False,
                  progress: Progress | None = None) -> AddReport:
        """Add each (path, name) to the collection: a file that cannot be added is reported in
        `failed` by name, and the others go in. Names and the collection name are cleaned."""
        with self._reading_turn(namespace, progress):
            return self._add_files(namespace, collection, files, shared=shared, progress=progress)

    def _add_files(self, namespace: str, collection: str, files: Iterable[tuple[Path, str]], *, shared: bool,
                   progress: Progress | None) -> AddReport:
        collection = collection_name(collection)
        report = AddReport(collection=collection, shared=shared)
        scope = self._scope_dir(namespace, shared)
        files = list(files)
        taken: set[str] = set()
        for number, (path, raw_name) in enumerate(files):
            def step(fraction: float, text: str, number=number) -> None:
                if progress is not None:
                    progress((number + fraction) / max(1, len(files)), text)

            try:
                name = _unique(file_name(raw_name), taken)
            except DocumentError as exc:
                report.failed.append((str(raw_name), str(exc)))
                continue
            step(0.0, f"reading {name}")
            try:
                self._add_one(scope, collection, shared, Path(path), name, report, step)
            except DocumentError as exc:
                report.failed.append((name, str(exc).removeprefix(f"{name}: ")))
            except OSError as exc:
                report.failed.append((name, f"could not be read or stored ({exc.strerror or exc})"))
        if progress is not None:
            progress(1.0, "done")
        return report

    def add_paths(self, namespace: str, collection: str, paths: Iterable[Path], *, shared: bool = False,
                  progress: Progress | None = None) -> AddReport:
        """Add files and folders from disk (the command line): a folder's supported files, found
        recursively, keep their path inside it as their name; hidden files and links are left out."""
        chosen: list[tuple[Path, str]] = []
        skipped: list[str] = []
        missing: list[tuple[str, str]] = []
        for path in map(Path, paths):
            if path.is_dir():
                for found in _walk(path, leave_out=self.root):
                    relative = found.relative_to(path).as_posix()
                    (chosen.append((found, relative)) if file_format(found.name) else skipped.append(relative))
            elif path.is_file():
                chosen.append((path, path.name))
            else:
                missing.append((str(path), "no such file or folder"))
        report = self.add_files(namespace, collection, chosen, shared=shared, progress=progress)
        report.failed = missing + report.failed
        report.skipped += skipped
        return report

    def _add_one(self, scope: Path, collection: str, shared: bool, path: Path, name: str, report: AddReport,
                 step: Progress) -> None:
        if file_format(name) is None:
            raise DocumentError(f"unsupported format; supported: {', '.join(supported_suffixes())}")
        size = path.stat().st_size
        limit = self.limits.max_file_bytes
        if size > limit:
            raise DocumentError(f"{_amount(size)} is more than the {_amount(limit)} a file may have "
                                "(app.max_document_bytes in mia.toml)")
        sha = _sha256(path)
        manifest_path = self._collection_dir(scope, collection) / "manifest.json"
        if _row_sha(self._read_manifest(manifest_path)["files"].get(name)) == sha:
            report.unchanged.append(name)
            return
        blob = self._load_blob(scope, sha)
        if blob is None:
            self._check_quota(scope, sha, size)  # before the work of reading it; again under the lock below
            content = self._read_content(path, name, step)
            meta = content.meta
            fresh = True
        else:
            content, meta, fresh = None, blob, False
        now = time.time()
        row = {"sha256": sha, "bytes": size, "added": now, **meta}
        with self._writing(scope):
            if content is not None:
                self._check_quota(scope, sha, size)  # files added meanwhile count
                self._store_content(scope, sha, path, content)
            elif self._load_blob(scope, sha) is None:  # its last other copy was removed meanwhile
                raise DocumentError("the stored copy it matched was removed meanwhile; add it again")
            manifest = self._read_manifest(manifest_path)
            manifest.setdefault("created", now)
            previous = manifest["files"].get(name)
            manifest["files"][name] = row
            self._write_manifest(manifest_path, manifest)
            if previous is not None and _row_sha(previous) != sha:
                self._collect_garbage(scope)
        info = _file_info(collection, shared, name, row)
        (report.added if fresh else report.reused).append(info)

    def _read_content(self, path: Path, name: str, step: Progress) -> _Content:
        """Parse and split (in a child process, under the budget), tokenise and embed one file's
        bytes (no lock held: this takes the time)."""
        parsed, passages = read_passages(path, name, self.budget, ocr_on=ocr.ocr_available())
        step(0.3, f"embedding {name} ({len(passages)} passages)")
        texts = [_indexed_text(passage) for passage in passages]
        tokens = tokenize(texts) if texts else []
        vectors = self._embed(texts, lambda fraction: step(0.3 + 0.7 * fraction, f"embedding {name}"))
        return _Content(_meta(parsed, len(passages)), passages, tokens, vectors)

    def _store_content(self, scope: Path, sha: str, original: Path, content: _Content) -> None:
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
        return {**{key: content[key] for key in _META_KEYS if key in content}, "passages": len(content["passages"])}

    # -- removing and re-indexing ----------------------------------------------------------------
    def remove(self, namespace: str, collection: str, file: str | None = None, *, shared: bool = False) -> int:
        """Remove one file of a collection, or the whole collection (file None); how many files went."""
        collection = collection_name(collection)
        scope = self._scope_dir(namespace, shared)
        folder = self._collection_dir(scope, collection)
        with self._writing(scope):
            manifest, problem = self._load_manifest(folder / "manifest.json")
            if problem and file is None:  # its files are unknown: the whole of it goes
                shutil.rmtree(folder)
                self._collect_garbage(scope)
                return 0
            if problem:
                raise DocumentError(f"The collection {collection!r} cannot be read file by file: {problem}.")
            if not manifest["files"]:
                raise DocumentError(f"There is no collection {collection!r} here.")
            if file is None:
                removed = len(manifest["files"])
                shutil.rmtree(folder)
            else:
                name = file_name(file)
                if name not in manifest["files"]:
                    raise DocumentError(f"There is no file {name!r} in {collection!r}.")
                del manifest["files"][name]
                removed = 1
                if manifest["files"]:
                    self._write_manifest(folder / "manifest.json", manifest)
                else:
                    shutil.rmtree(folder)
            self._collect_garbage(scope)
        return removed

    def reindex(self, namespace: str, collection: str, file: str | None = None, *, shared: bool = False,
                progress: Progress | None = None) -> AddReport:
        """Read the files again from their stored copies, parse and embed them anew (after installing
        tesseract, say); one file, or the whole collection."""
        with self._reading_turn(namespace, progress):
            return self._reindex(namespace, collection, file, shared=shared, progress=progress)

    def _reindex(self, namespace: str, collection: str, file: str | None, *, shared: bool,
                 progress: Progress | None) -> AddReport:
        collection = collection_name(collection)
        scope = self._scope_dir(namespace, shared)
        manifest_path = self._collection_dir(scope, collection) / "manifest.json"
        rows = self._read_manifest(manifest_path)["files"]
        if not rows:
            raise DocumentError(f"There is no collection {collection!r} here.")
        names = [file_name(file)] if file is not None else sorted(rows)
        report = AddReport(collection=collection, shared=shared)
        for number, name in enumerate(names):
            if name not in rows:
                report.failed.append((name, f"no such file in {collection!r}"))
                continue
            sha = _row_sha(rows[name])
            if not sha:
                report.failed.append((name, "its record names no stored copy; remove it and add the file again"))
                continue

            def step(fraction: float, text: str, number=number) -> None:
                if progress is not None:
                    progress((number + fraction) / len(names), text)

            original = scope / "blobs" / f"{sha}.orig"
            try:
                content = self._read_content(original, name, step)
            except DocumentError as exc:
                report.failed.append((name, str(exc).removeprefix(f"{name}: ")))
                continue
            except OSError as exc:
                report.failed.append((name, f"its stored copy could not be read ({exc.strerror or exc})"))
                continue
            with self._writing(scope):
                if not original.is_file():  # removed meanwhile
                    report.failed.append((name, "it was removed while it was read again"))
                    continue
                meta = {**content.meta, "bytes": original.stat().st_size}  # a damaged row's size is mended too
                self._store_content(scope, sha, original, content)
                for _, path in self._manifests(scope):  # every file with these bytes now has these passages
                    manifest = self._read_manifest(path)
                    changed = False
                    for other in manifest["files"].values():
                        if _row_sha(other) == sha:
                            other.update(meta)
                            changed = True
                    if changed:
                        self._write_manifest(path, manifest)
            report.added.append(_file_info(collection, shared, name, {**rows[name], **meta}))
        if progress is not None:
            progress(1.0, "done")
        return report

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

    # -- reading ---------------------------------------------------------------------------------
    def _located(self, namespace: str, locator: str) -> tuple[Locator, Path, str]:
        """A locator's place, the scope it is in and its file's content hash, if `namespace` may read it."""
        place = Locator.parse(locator)
        scope = self._scope_dir(namespace, place.shared)
        rows = self._read_manifest(self._collection_dir(scope, place.collection) / "manifest.json")["files"]
        if place.file not in rows:
            raise DocumentError(f"No document {place.file!r} in collection {place.collection!r} is yours to read.")
        sha = _row_sha(rows[place.file])
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

    def _blob(self, scope: Path, sha: str) -> _Blob:
        path = scope / "blobs" / f"{sha}.json"
        stamp = path.stat().st_mtime_ns
        key = (str(scope), sha)
        cached = self._blob_cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        content = json.loads(path.read_text(encoding="utf-8"))
        passages = [DocPassage.from_dict(row) for row in content["passages"]]
        tokens = content.get("tokens") or tokenize([_indexed_text(p) for p in passages])
        # One string object per distinct word: at 100,000 passages the tokens would otherwise take GBs.
        blob = _Blob(passages, [[sys.intern(token) for token in row] for row in tokens], None)
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


_META_KEYS = ("format", "indexed", "pages", "ocr_pages", "unread_pages", "ocr_on", "warnings")  # and "passages"


_SHA256 = re.compile(r"[0-9a-f]{64}")


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _texts(value) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


_ROW_CHECKS = {  # what each value of a manifest row must be
    "sha256": lambda value: isinstance(value, str) and _SHA256.fullmatch(value) is not None,
    "bytes": _whole, "passages": _whole, "pages": _whole, "ocr_pages": _whole,
    "format": lambda value: isinstance(value, str),
    "added": lambda value: _whole(value) or isinstance(value, float),
    "indexed": lambda value: _whole(value) or isinstance(value, float),
    "unread_pages": lambda value: isinstance(value, list) and all(map(_whole, value)),
    "ocr_on": lambda value: isinstance(value, bool),
    "warnings": _texts,
}


def _file_info(collection: str, shared: bool, name: str, row) -> FileInfo:
    """A manifest row as a FileInfo. A value of the wrong kind (a damaged row) is left at its default
    and named in the warnings, so that the file is still listed and can be removed."""
    row = row if isinstance(row, dict) else {}
    known = {key: value for key, value in row.items() if key in _ROW_CHECKS and _ROW_CHECKS[key](value)}
    damaged = sorted(key for key in _ROW_CHECKS if key not in known and (key in row or key == "sha256"))
    info = FileInfo(collection=collection, shared=shared, name=name, **{
        "sha256": "", "bytes": 0, "format": "", "added": 0.0, "indexed": 0.0, "passages": 0, **known})
    if damaged:
        advice = "remove it and add the file again" if "sha256" in damaged else "re-index or remove it"
        info.warnings = [*info.warnings, f"its record is damaged ({', '.join(damaged)}): {advice}"]
    return info


def _row_sha(row) -> str:
    """A manifest row's content hash, '' when it has none (a damaged row)."""
    sha = row.get("sha256") if isinstance(row, dict) else None
    return sha if _ROW_CHECKS["sha256"](sha) else ""


def _meta(parsed: ParsedFile, passages: int) -> dict:
    return {"format": parsed.format, "indexed": time.time(), "passages": passages, "pages": parsed.pages,
            "ocr_pages": parsed.ocr_pages, "unread_pages": parsed.unread_pages, "ocr_on": parsed.ocr_on,
            "warnings": parsed.warnings}


def _amount(count: int) -> str:
    return f"{count / 1e6:,.1f} MB" if count >= 100_000 else f"{count:,} bytes"


def _indexed_text(passage: DocPassage) -> str:
    """What BM25 and the embedder read: the passage under its heading (as the wiki's 'Title. text')."""
    return f"{passage.heading}. {passage.text}" if passage.heading else passage.text


def _unique(name: str, taken: set[str]) -> str:
    """Two files of one upload with the same name (from two folders) are kept apart: 'a-2.pdf'."""
    candidate, number = name, 1
    while candidate in taken:
        number += 1
        stem, dot, suffix = name.rpartition(".")
        candidate = f"{stem}-{number}.{suffix}" if dot else f"{name}-{number}"
    taken.add(candidate)
    return candidate


def _walk(folder: Path, *, leave_out: Path) -> list[Path]:
    """Files under `folder`, sorted, without hidden ones, links, or the store's own folder."""
    found = []
    leave_out = leave_out.resolve()
    for current, folders, files in os.walk(folder, followlinks=False):
        folders[:] = sorted(name for name in folders
                            if not name.startswith(".") and (Path(current) / name).resolve() != leave_out)
        for name in sorted(files):
            path = Path(current) / name
            if not name.startswith(".") and not path.is_symlink():
                found.append(path)
    return found


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
