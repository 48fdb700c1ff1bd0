"""Removing files from the document store (backend.documents.store): one file of a collection or
the whole collection, under the scope's lock, then the stored content no file refers to any more."""

from __future__ import annotations

import shutil

from backend.documents.errors import DocumentError
from backend.documents.naming import collection_name, file_name


class DocumentRemoval:
    """Part of DocumentStore, whose StoreLayout and ContentBlobs give the folders, manifests and
    stored content."""


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
