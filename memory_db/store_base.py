"""What every part of MemoryStore shares: the database, the lock, the embedder and the vectors."""
from __future__ import annotations

import threading

import numpy as np
from sqlalchemy import Connection, Engine, select

from .embedder import Embedder, get_embedder
from .rows import MEMORY_COLUMNS
from .schema import memories
from .vector_backend import EmbeddingColumns, VectorBackend
from .vector_index import IndexSettings


class StoreBase:
    """Set up by MemoryStore.__init__; all writes of one process go through `_lock`."""

    url: str
    _engine: Engine
    _embedder: Embedder | None
    _capacity: int | None
    _namespace_capacity: dict[str, int]
    _merge_threshold: float | None
    _index_settings: IndexSettings
    _lock: threading.RLock
    _columns: EmbeddingColumns
    _vectors: VectorBackend

    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            self._embedder = get_embedder()
        return self._embedder

    def _writer(self):
        return self._engine.execution_options(sqlite_write=True).begin()

    def _encode(self, question: str, caption: str | None) -> tuple[np.ndarray, np.ndarray | None]:
        vectors = self.embedder.encode([question] + ([caption] if caption else []))
        return vectors[0], (vectors[1] if caption else None)

    def _row(self, conn: Connection, namespace: str, memory_id: str, *, with_vectors: bool = False):
        columns = list(MEMORY_COLUMNS)
        if with_vectors:
            columns += [memories.c.question_embedding, memories.c.caption_embedding]
        return conn.execute(
            select(*columns).where(memories.c.namespace == namespace, memories.c.id == memory_id)
        ).one_or_none()
