"""PostgreSQL with the pgvector extension: each memory's embeddings also in `vector(384)` columns.

When the `vector` extension can be created (or already exists on the connection's search_path),
the `memories` table gets `question_vector` and `caption_vector` (text+image memories) next to the
byte copies, an HNSW index on the question vector (inner product: the stored vectors are
normalised, so it ranks as the in-process index's dot product does) and a B-tree index on the
bucket and label. Contrastive search then runs in SQL (memory_db.database_search) and no
process loads a namespace. Without the extension nothing changes: the store keeps the bytes and
searches in process, as on SQLite.

`enable_vectors` is what migration 0005 runs; MemoryStore also runs it on open when an earlier
upgrade found no extension, so installing pgvector later is enough.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import Column, Connection, MetaData, Table, bindparam, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.types import UserDefinedType

from .embedder import EMBEDDING_DIM
from .rows import vectors_from_bytes, vectors_problem
from .schema import memories

log = logging.getLogger(__name__)

EXTENSION = "vector"
HNSW_INDEX = "ix_memories_question_vector_hnsw"
LABEL_INDEX = "ix_memories_bucket_label"
MISSING_INDEX = "ix_memories_without_vector"
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 64
BACKFILL_ROWS = 2_000
ENABLE_LOCK_KEY = 0x4D49_4176  # pg_advisory_xact_lock key: one process at a time adds the columns


class Vector(UserDefinedType):
    """pgvector's `vector(n)`; values are bound in its text form, '[0.1,0.2,...]'."""

    cache_ok = True

    def __init__(self, dim: int = EMBEDDING_DIM):
        self.dim = dim

    def get_col_spec(self, **_kw: Any) -> str:
        return f"vector({self.dim})"

    def bind_processor(self, dialect):
        def process(value):
            return None if value is None else vector_literal(value)
        return process


@functools.lru_cache(maxsize=4)
def _literal_format(dim: int) -> str:
    return "[" + ",".join(["%.9g"] * dim) + "]"


def vector_literal(vector: np.ndarray | str) -> str:
    """A vector in pgvector's text form; 9 significant digits read back as the same float32
    (one % format: about 3 times faster than joining reprs)."""
    if isinstance(vector, str):
        return vector
    values = np.asarray(vector, dtype=np.float32).ravel().tolist()
    return _literal_format(len(values)) % tuple(values)


# The memories table as seen with the vector columns (its own MetaData: SQLite's schema and the
# migrations' metadata stay as they are). Inserts and updates on pgvector go through this one.
vector_memories = Table(
    "memories", MetaData(),
    *(column._copy() for column in memories.columns),
    Column("question_vector", Vector(), nullable=True),
    Column("caption_vector", Vector(), nullable=True),
)


@dataclass(frozen=True)
class VectorSupport:
    """What this PostgreSQL database offers the store."""

    enabled: bool
    version: str | None = None  # the extension's version, e.g. "0.6.2"
    reason: str = ""  # why not, when not enabled

    @property
    def iterative_scans(self) -> bool:
        """pgvector 0.8 can go on scanning an HNSW index until a filtered LIMIT is met."""
        return self.enabled and _version_tuple(self.version) >= (0, 8, 0)


def _version_tuple(version: str | None) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in (version or "0").split("."))
    except ValueError:
        return (0,)


def vector_columns_present(conn: Connection) -> bool:
    found = conn.execute(text(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
        "WHERE attrelid = to_regclass('memories') AND attname = 'question_vector' AND NOT attisdropped"
    )).scalar_one_or_none()
    return found is not None and found.startswith("vector")


def _extension_version(conn: Connection) -> str | None:
    return conn.execute(text("SELECT extversion FROM pg_extension WHERE extname = :name"),
                        {"name": EXTENSION}).scalar_one_or_none()


def _vector_type_visible(conn: Connection) -> bool:
    return conn.execute(text("SELECT to_regtype('vector') IS NOT NULL")).scalar_one()


def _try_create_extension(conn: Connection) -> str:
    """Create the extension if it is missing; '' on success, else why not."""
    if _vector_type_visible(conn):
        return ""
    schema = conn.execute(text(
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = :name"),
        {"name": EXTENSION}).scalar_one_or_none()
    if schema is not None:
        return (f"the {EXTENSION!r} extension is installed in schema {schema!r}, which is not on this "
                "connection's search_path")
    try:
        with conn.begin_nested():
            conn.execute(text(f"CREATE EXTENSION IF NOT EXISTS {EXTENSION}"))
    except DBAPIError as exc:
        first_line = str(exc.orig).strip().splitlines()[0] if exc.orig is not None else str(exc)
        return f"CREATE EXTENSION {EXTENSION} failed: {first_line}"
    if not _vector_type_visible(conn):
        return f"the {EXTENSION!r} extension was created but its type is not on the search_path"
    return ""


def enable_vectors(conn: Connection) -> VectorSupport:
    """Give the memories table its vector columns and indexes when pgvector can be had (idempotent;
    runs inside the caller's transaction). Rows already stored get their vectors from the bytes."""
    if conn.dialect.name != "postgresql":
        return VectorSupport(False, reason="not PostgreSQL")
    if vector_columns_present(conn) and _vector_type_visible(conn):
        fill_missing_vectors(conn)
        return VectorSupport(True, _extension_version(conn))
    reason = _try_create_extension(conn)
    if reason:
        return VectorSupport(False, reason=reason)
    conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ENABLE_LOCK_KEY})
    if not vector_columns_present(conn):
        log.info("pgvector %s: adding vector(%d) columns and an HNSW index to the memories table",
                 _extension_version(conn), EMBEDDING_DIM)
        conn.execute(text(
            f"ALTER TABLE memories ADD COLUMN IF NOT EXISTS question_vector vector({EMBEDDING_DIM}), "
            f"ADD COLUMN IF NOT EXISTS caption_vector vector({EMBEDDING_DIM})"))
        # In the row, not in TOAST: a search reads each candidate's vectors; the byte copies
        # (read only to rebuild an in-process index) go out of line uncompressed instead.
        conn.execute(text(
            "ALTER TABLE memories ALTER COLUMN question_vector SET STORAGE PLAIN, "
            "ALTER COLUMN caption_vector SET STORAGE PLAIN, "
            "ALTER COLUMN question_embedding SET STORAGE EXTERNAL, "
            "ALTER COLUMN caption_embedding SET STORAGE EXTERNAL"))
    # Rows written before the columns existed, and any written past the store, are found by this
    # partial index; it stays empty while every write fills the vectors.
    conn.execute(text(
        f"CREATE INDEX IF NOT EXISTS {MISSING_INDEX} ON memories (row_id) WHERE question_vector IS NULL"))
    filled = fill_missing_vectors(conn)
    if filled:
        log.info("pgvector: filled the vectors of %d stored memories from their bytes", filled)
    # the graph of the rows already stored should fit in memory while it is built (far slower
    # otherwise): about 2.5 kB a memory, from PostgreSQL's default 64 MB up to 2 GB
    rows = conn.execute(text("SELECT count(*) FROM memories")).scalar_one()
    work_mem_mb = int(min(2048, max(64, rows * 2.5 / 1024)))
    conn.execute(text("SELECT set_config('maintenance_work_mem', :value, true)"), {"value": f"{work_mem_mb}MB"})
    conn.execute(text(
        f"CREATE INDEX IF NOT EXISTS {HNSW_INDEX} ON memories USING hnsw (question_vector vector_ip_ops) "
        f"WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"))
    conn.execute(text(
        f"CREATE INDEX IF NOT EXISTS {LABEL_INDEX} ON memories (namespace, modality, correct, question_type)"))
    return VectorSupport(True, _extension_version(conn))


def disable_vectors(conn: Connection) -> None:
    """Migration 0005's downgrade: drop the vector columns and their indexes (the bytes stay)."""
    if conn.dialect.name != "postgresql" or not vector_columns_present(conn):
        return
    for index in (HNSW_INDEX, LABEL_INDEX, MISSING_INDEX):
        conn.execute(text(f"DROP INDEX IF EXISTS {index}"))
    conn.execute(text("ALTER TABLE memories DROP COLUMN IF EXISTS question_vector, "
                      "DROP COLUMN IF EXISTS caption_vector"))


def fill_missing_vectors(conn: Connection) -> int:
    """Copy the byte embeddings of rows without vectors into the vector columns; returns how many.
    A row whose bytes cannot be a vector keeps none (MemoryStore.unreadable reports it)."""
    filled, after = 0, 0
    update = (vector_memories.update()
              .where(vector_memories.c.row_id == bindparam("target"))
              .values(question_vector=bindparam("q"), caption_vector=bindparam("c")))
    while True:
        rows = conn.execute(text(
            "SELECT row_id, modality, question_embedding, caption_embedding FROM memories "
            "WHERE question_vector IS NULL AND row_id > :after ORDER BY row_id LIMIT :limit"),
            {"after": after, "limit": BACKFILL_ROWS}).all()
        if not rows:
            return filled
        after = rows[-1].row_id
        payload = []
        for row in rows:
            question, caption = row.question_embedding, row.caption_embedding
            if vectors_problem(row.modality, None if question is None else len(question),
                               None if caption is None else len(caption)) is not None:
                continue
            payload.append({"target": row.row_id, "q": vectors_from_bytes([question])[0],
                            "c": None if caption is None else vectors_from_bytes([caption])[0]})
        if payload:
            conn.execute(update, payload)
            filled += len(payload)


def vector_values(question_vector: np.ndarray, caption_vector: np.ndarray | None) -> dict[str, Any]:
    """The vector columns' values for a memory's embeddings."""
    return {"question_vector": question_vector, "caption_vector": caption_vector}
