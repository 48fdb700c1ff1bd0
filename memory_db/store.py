"""MemoryStore: the Manager's memory of how questions were answered (MIA non-parametric memory).

Rows live in SQLite or PostgreSQL (SQLAlchemy Core); each namespace's vectors live in this process
or, on PostgreSQL with pgvector, in the rows (memory_db.vector_backend). The store is composed of
one part per idea: adding, searching, reading, curation, outcomes and verdicts, history and undo,
import and export, the learning queue and lease, sources struck as wrong. All writes of one process go through one lock.
"""
from __future__ import annotations

import logging
import threading

from .adding import Adding
from .curation import Curation
from .database import migrate, open_engine
from .database_search import DatabaseSearch
from .embedder import Embedder
from .errors import InvalidMemoryError
from .history import HistoryAndUndo
from .import_export import ImportExport
from .loading import load_namespace
from .login_failures import LoginFailures
from .outcomes import Outcomes
from .pgvector import enable_vectors
from .queue_and_lease import QueueAndLease
from .reading import Reading
from .searching import Searching
from .struck import StruckSources
from .vector_backend import (BYTE_COLUMNS, VECTOR_COLUMNS, DatabaseVectors, EmbeddingColumns, InProcessVectors,
                             VectorBackend)
from .vector_index import IndexSettings, NamespaceIndex

log = logging.getLogger(__name__)


class MemoryStore(Adding, Searching, Reading, Curation, QueueAndLease, Outcomes, HistoryAndUndo, ImportExport,
                  StruckSources):
    """Stores, scores and retrieves workflow memories, partitioned by namespace."""

    def __init__(
        self,
        url: str,
        *,
        embedder: Embedder | None = None,
        capacity: int | None = None,
        namespace_capacity: dict[str, int] | None = None,
        merge_threshold: float | None = 0.95,
        index_settings: IndexSettings | None = None,
    ):
        """`capacity`: most memories per namespace (None: unlimited), overridden per namespace
        by `namespace_capacity`. `merge_threshold`: a new memory at least this similar to a
        stored one is merged into it (None: never merge; exact repeats are always handled)."""
        for name, value in [("capacity", capacity), *(namespace_capacity or {}).items()]:
            if value is not None and (not isinstance(value, int) or value < 1):
                raise InvalidMemoryError(f"Capacity for {name!r} must be a positive integer, got {value!r}.")
        if merge_threshold is not None and not 0.0 < merge_threshold <= 1.0:
            raise InvalidMemoryError(f"merge_threshold must be in (0, 1] or None, got {merge_threshold!r}.")
        self.url = url
        self._engine = open_engine(url)
        migrate(self._engine)
        self._embedder = embedder
        self._capacity = capacity
        self._namespace_capacity = dict(namespace_capacity or {})
        self._merge_threshold = merge_threshold
        self._index_settings = index_settings or IndexSettings()
        self._lock = threading.RLock()
        self._columns, self._vectors = self._open_vectors()

    def _open_vectors(self) -> tuple[EmbeddingColumns, VectorBackend]:
        """Where this database keeps the vectors: in the rows' vector columns when PostgreSQL has
        pgvector, searched in SQL unless the index settings say otherwise; else in this process."""
        # the loader is looked up on each load, so that a test can count loads on the instance
        in_process = InProcessVectors(self._lock, self._writer, lambda namespace: self._load_namespace(namespace))
        if self._engine.dialect.name != "postgresql":
            return BYTE_COLUMNS, in_process
        with self._engine.begin() as conn:
            support = enable_vectors(conn)  # migration 0005 does this; again here, should pgvector come later
        if not support.enabled:
            log.warning(
                "Memory store on PostgreSQL without pgvector (%s): embeddings stay bytes and each process "
                "searches its own in-memory copy of a namespace, reloaded whenever another process writes "
                "to it. For search in the database, create the extension (CREATE EXTENSION vector, as a "
                "superuser) or run a server that has it: python -m memory_db.pgvector_server DATA_DIR.",
                support.reason)
            return BYTE_COLUMNS, in_process
        if not self._index_settings.database_search:
            return VECTOR_COLUMNS, in_process
        database_search = DatabaseSearch(support, self._index_settings)
        log.info("Memory store on PostgreSQL with pgvector %s: search in SQL (HNSW index)", support.version)
        return VECTOR_COLUMNS, DatabaseVectors(database_search, self._lock, self._writer)

    def _load_namespace(self, namespace: str) -> tuple[NamespaceIndex, int]:
        return load_namespace(self._engine, namespace, self._index_settings)

    def login_failures(self) -> LoginFailures:
        """Wrong-password counts that every app process on this database shares."""
        return LoginFailures(self._engine, self._writer)

    def close(self) -> None:
        with self._lock:
            self._vectors.close()
            self._engine.dispose()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # ---- looked at by tests and benchmarks ------------------------------------------------
    @property
    def _indexes(self) -> dict[str, NamespaceIndex]:
        """The namespaces whose vectors this process holds."""
        return getattr(self._vectors, "indexes", {})

    @property
    def _database_search(self) -> DatabaseSearch | None:
        """Set when search runs in SQL."""
        return getattr(self._vectors, "database_search", None)
