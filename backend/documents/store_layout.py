"""Where the document store (backend.documents.store) keeps a namespace's files: a folder per scope,
the per-scope lock every write holds, and each collection's manifest (read with a sentence when it
is damaged, replaced atomically so that a reader never sees half of one), with the scope's quota."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from backend.documents.errors import DocumentError
from backend.documents.naming import namespace_folder
from backend.documents.store_records import FileInfo, amount, file_info

log = logging.getLogger("backend.documents.store")  # the store's one logger, whichever part logs

SHARED_FOLDER = "shared"


class StoreLayout:
    """Part of DocumentStore, which sets `root` and `limits`."""


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
                yield file_info(collection, shared, name, row)

    def _check_quota(self, scope: Path, sha: str, size: int) -> None:
        """Refuse content that would take the scope past its quota (bytes it already holds are free)."""
        stored = {info.sha256: info.bytes for info in self._files(scope, False)}
        used = sum(stored.values())
        if sha not in stored and used + size > self.limits.max_namespace_bytes:
            raise DocumentError(f"the documents here already take {amount(used)} of the "
                                f"{amount(self.limits.max_namespace_bytes)} allowed "
                                "(app.max_namespace_document_bytes in mia.toml); remove some first")
