"""Where a namespace's vectors live, behind one protocol that the memory operations call.

On SQLite (and on PostgreSQL without pgvector, or told to search in process) each namespace's vectors
live in an in-process index that is updated right after every committed write; a per-namespace
version counter, bumped by every write transaction, tells a process when another one changed the
namespace, and its index is then reloaded (InProcessVectors). On PostgreSQL with pgvector the vectors
live in the rows' vector columns, which every write fills in its own transaction, and search runs in
SQL: no process loads a namespace (DatabaseVectors).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from threading import RLock
from typing import Any, Protocol, TypeVar

import numpy as np
from sqlalchemy import Connection, Table

from .database_search import DatabaseSearch
from .loading import index_new_rows
from .pgvector import vector_memories, vector_values
from .records import Memory
from .rows import vector_to_bytes
from .schema import memories
from .scoring import Ranked
from .vector_index import IndexEntry, NamespaceIndex
from .versions import bump_version, read_version

Result = TypeVar("Result")
Vectors = tuple[np.ndarray, np.ndarray | None]  # a memory's question vector and caption vector
Nearest = tuple[int, float] | None  # the most similar stored memory: row id, similarity
Writer = Callable[[], AbstractContextManager[Connection]]


class VectorTransaction(Protocol):
    """The vectors of one namespace within a write transaction: asked for near-duplicates, and told
    of every row the transaction writes."""

    def nearest(self, modality: str, vectors: Vectors, correct: bool | None) -> Nearest: ...

    def nearest_many(self, question_vectors: Sequence[np.ndarray]) -> list[Nearest]:
        """`nearest` for several caption-less (text) memories, of either label."""

    def added(self, row_id: int, memory: Memory, vectors: Vectors) -> None: ...

    def added_many(self, stored: list[Memory], row_ids: list[int], vectors: list[Vectors]) -> None: ...

    def changed(self, row_id: int, memory: Memory, vectors: Vectors | None) -> None:
        """The row now holds `memory` (same modality); `vectors` when its question or caption changed."""

    def counted(self, modality: str, row_id: int, usage: int, success: int) -> None: ...

    def removed(self, modality: str, row_id: int) -> None: ...

    def apply_pending(self) -> None:
        """Let `nearest` see the rows written so far in this transaction."""


class VectorBackend(Protocol):
    def write(self, namespace: str, work: Callable[[Connection, VectorTransaction], Result]) -> Result:
        """Run `work` in one write transaction of `namespace`, with the lock of this process held."""

    def search(self, conn: Connection, namespace: str, modality: str, question_vector: np.ndarray,
               caption_vector: np.ndarray | None, **options: Any) -> tuple[list[Ranked], list[Ranked]]:
        """The best successful and failed rows of the bucket (DatabaseSearch.search's options)."""

    def forget(self, namespace: str) -> None:
        """Drop what this process holds of `namespace`; it is read again on next use."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class EmbeddingColumns:
    """The memories table as a memory's embeddings are written into it: as bytes, and with pgvector
    in the vector columns too (whichever backend searches)."""

    table: Table
    with_vector_columns: bool

    def values(self, question_vector: np.ndarray, caption_vector: np.ndarray | None) -> dict[str, Any]:
        values = {"question_embedding": vector_to_bytes(question_vector),
                  "caption_embedding": vector_to_bytes(caption_vector) if caption_vector is not None else None}
        if self.with_vector_columns:
            values.update(vector_values(question_vector, caption_vector))
        return values


BYTE_COLUMNS = EmbeddingColumns(memories, with_vector_columns=False)
VECTOR_COLUMNS = EmbeddingColumns(vector_memories, with_vector_columns=True)


class InProcessVectors:
    """Each namespace's vectors in a NamespaceIndex of this process."""

    def __init__(self, lock: RLock, writer: Writer, load: Callable[[str], tuple[NamespaceIndex, int]]):
        """`load`: a namespace's index built from the database, and the version it reflects."""
        self._lock = lock
        self._writer = writer
        self._load = load
        self.indexes: dict[str, NamespaceIndex] = {}
        self._versions: dict[str, int] = {}  # namespace -> version its index reflects

    def write(self, namespace: str, work: Callable[[Connection, VectorTransaction], Result]) -> Result:
        with self._lock:
            with self._writer() as conn:
                # inside the write transaction nobody else can commit (SQLite), so the index
                # checked here stays current until our own commit
                transaction = _IndexTransaction(self._index(namespace, conn))
                result = work(conn, transaction)
                version = bump_version(conn, namespace)
            try:
                transaction.apply_pending()
            except Exception:
                self.indexes.pop(namespace, None)  # rebuilt from the database on next use
                raise
            if version == self._versions.get(namespace, 0) + 1:
                self._versions[namespace] = version
            else:  # another process wrote in between: our index misses its change
                self.indexes.pop(namespace, None)
            return result

    def search(self, conn: Connection, namespace: str, modality: str, question_vector: np.ndarray,
               caption_vector: np.ndarray | None, **options: Any) -> tuple[list[Ranked], list[Ranked]]:
        with self._lock:
            bucket = self._index(namespace, conn).buckets.get(modality)
            if bucket is None:
                return [], []
            return bucket.search(question_vector, caption_vector, **options)

    def forget(self, namespace: str) -> None:
        self.indexes.pop(namespace, None)

    def close(self) -> None:
        self.indexes.clear()

    def _index(self, namespace: str, conn: Connection) -> NamespaceIndex:
        """The namespace's index, (re)loaded when this process has none or another process
        changed the namespace since. Call with the lock held."""
        index = self.indexes.get(namespace)
        if index is not None and read_version(conn, namespace) == self._versions.get(namespace):
            return index
        index, self._versions[namespace] = self._load(namespace)
        self.indexes[namespace] = index
        return index


class _IndexTransaction:
    """Index updates queued while the transaction runs and applied once it commits: a transaction
    that fails leaves the index as it was."""

    def __init__(self, index: NamespaceIndex):
        self._index = index
        self._pending: list[Callable[[], None]] = []

    def nearest(self, modality: str, vectors: Vectors, correct: bool | None) -> Nearest:
        return self._index.bucket(modality).nearest(*vectors, correct=correct)

    def nearest_many(self, question_vectors: Sequence[np.ndarray]) -> list[Nearest]:
        return [self.nearest("text", (vector, None), None) for vector in question_vectors]

    def added(self, row_id: int, memory: Memory, vectors: Vectors) -> None:
        bucket = self._index.bucket(memory.modality)
        entry = IndexEntry(row_id, vectors[0], vectors[1], memory.correct, memory.usage_count,
                           memory.success_count, memory.question_type)
        self._pending.append(lambda: bucket.add(entry))

    def added_many(self, stored: list[Memory], row_ids: list[int], vectors: list[Vectors]) -> None:
        self._pending.append(lambda: index_new_rows(self._index, stored, row_ids, vectors))

    def changed(self, row_id: int, memory: Memory, vectors: Vectors | None) -> None:
        bucket = self._index.bucket(memory.modality)
        self._pending.append(lambda: bucket.update(row_id, correct=memory.correct, usage=memory.usage_count,
                                                   success=memory.success_count, question_type=memory.question_type))
        if vectors is not None:
            self._pending.append(lambda: bucket.set_vectors(row_id, vectors[0], vectors[1]))

    def counted(self, modality: str, row_id: int, usage: int, success: int) -> None:
        bucket = self._index.bucket(modality)
        self._pending.append(lambda: bucket.update(row_id, usage=usage, success=success))

    def removed(self, modality: str, row_id: int) -> None:
        self._pending.append(lambda: self._unindex(modality, row_id))

    def apply_pending(self) -> None:
        pending, self._pending = self._pending, []
        for update in pending:
            update()

    def _unindex(self, modality: str, row_id: int) -> None:
        """Take a deleted row out of the index; an unreadable row may never have been put in."""
        bucket = self._index.buckets.get(modality)
        if bucket is not None and bucket.position(row_id) is not None:
            bucket.remove(row_id)


class DatabaseVectors:
    """PostgreSQL with pgvector: the vectors are in the rows, which every write fills, and search
    runs in SQL. Nothing is held in process."""

    def __init__(self, database_search: DatabaseSearch, lock: RLock, writer: Writer):
        self.database_search = database_search
        self._lock = lock
        self._writer = writer

    def write(self, namespace: str, work: Callable[[Connection, VectorTransaction], Result]) -> Result:
        with self._lock, self._writer() as conn:
            # first: the counter's row stays locked until commit, so the writers of one namespace
            # take turns across processes (as SQLite's write lock makes them) and a duplicate
            # check or an eviction sees every earlier write
            bump_version(conn, namespace)
            return work(conn, _DatabaseTransaction(self.database_search, conn, namespace))

    def search(self, conn: Connection, namespace: str, modality: str, question_vector: np.ndarray,
               caption_vector: np.ndarray | None, **options: Any) -> tuple[list[Ranked], list[Ranked]]:
        return self.database_search.search(conn, namespace, modality, question_vector, caption_vector, **options)

    def forget(self, namespace: str) -> None:
        pass

    def close(self) -> None:
        pass


class _DatabaseTransaction:
    """Near-duplicates found in SQL; what the transaction writes is in the rows already."""

    def __init__(self, database_search: DatabaseSearch, conn: Connection, namespace: str):
        self._search = database_search
        self._conn = conn
        self._namespace = namespace

    def nearest(self, modality: str, vectors: Vectors, correct: bool | None) -> Nearest:
        return self._search.nearest(self._conn, self._namespace, modality, *vectors, correct=correct)

    def nearest_many(self, question_vectors: Sequence[np.ndarray]) -> list[Nearest]:
        return self._search.nearest_many(self._conn, self._namespace, question_vectors)

    def added(self, row_id: int, memory: Memory, vectors: Vectors) -> None:
        pass

    def added_many(self, stored: list[Memory], row_ids: list[int], vectors: list[Vectors]) -> None:
        pass

    def changed(self, row_id: int, memory: Memory, vectors: Vectors | None) -> None:
        pass

    def counted(self, modality: str, row_id: int, usage: int, success: int) -> None:
        pass

    def removed(self, modality: str, row_id: int) -> None:
        pass

    def apply_pending(self) -> None:
        pass
