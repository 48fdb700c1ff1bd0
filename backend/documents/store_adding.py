"""Adding files to the document store (backend.documents.store), and reading them again: each file
parsed in a child process under the documents budget, cut into passages, tokenised and embedded with
no lock held, then stored and listed in its collection's manifest under the scope's lock. Bytes the
scope already holds are reused, whatever their name or collection; a file that cannot be added is
reported by name and the others go in."""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from backend.documents import ocr
from backend.documents.errors import DocumentError
from backend.documents.naming import collection_name, file_name
from backend.documents.parse_process import read_passages
from backend.documents.parsing import file_format, supported_suffixes
from backend.documents.read_turns import ReadTurns
from backend.documents.store_blobs import Content, indexed_text
from backend.documents.store_records import AddReport, amount, file_info, parsed_meta, row_sha
from backend.tools.text_ranking import tokenize

Progress = Callable[[float, str], None]


class DocumentAdding:
    """Part of DocumentStore, which sets `root`, `limits`, `budget`, `_lock` and `_read_turns`, and
    whose StoreLayout and ContentBlobs give the folders, manifests and stored content."""

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
            raise DocumentError(f"{amount(size)} is more than the {amount(limit)} a file may have "
                                "(app.max_document_bytes in mia.toml)")
        sha = _sha256(path)
        manifest_path = self._collection_dir(scope, collection) / "manifest.json"
        if row_sha(self._read_manifest(manifest_path)["files"].get(name)) == sha:
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
            if previous is not None and row_sha(previous) != sha:
                self._collect_garbage(scope)
        info = file_info(collection, shared, name, row)
        (report.added if fresh else report.reused).append(info)

    def _read_content(self, path: Path, name: str, step: Progress) -> Content:
        """Parse and split (in a child process, under the budget), tokenise and embed one file's
        bytes (no lock held: this takes the time)."""
        parsed, passages = read_passages(path, name, self.budget, ocr_on=ocr.ocr_available())
        step(0.3, f"embedding {name} ({len(passages)} passages)")
        texts = [indexed_text(passage) for passage in passages]
        tokens = tokenize(texts) if texts else []
        vectors = self._embed(texts, lambda fraction: step(0.3 + 0.7 * fraction, f"embedding {name}"))
        return Content(parsed_meta(parsed, len(passages)), passages, tokens, vectors)

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
            sha = row_sha(rows[name])
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
                        if row_sha(other) == sha:
                            other.update(meta)
                            changed = True
                    if changed:
                        self._write_manifest(path, manifest)
            report.added.append(file_info(collection, shared, name, {**rows[name], **meta}))
        if progress is not None:
            progress(1.0, "done")
        return report


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
