"""Database tables (SQLAlchemy Core). Alembic migrations in memory_db/migrations build them."""
from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
)

# SQLite only turns an INTEGER PRIMARY KEY into an auto-incrementing rowid alias.
RowId = BigInteger().with_variant(Integer(), "sqlite")

metadata = MetaData()

memories = Table(
    "memories",
    metadata,
    Column("row_id", RowId, primary_key=True, autoincrement=True),
    Column("id", String(36), nullable=False),
    Column("namespace", String(200), nullable=False),
    Column("question", Text, nullable=False),
    Column("caption", Text, nullable=True),
    Column("summary", Text, nullable=False),
    Column("plan", Text, nullable=False),
    Column("correct", Boolean, nullable=False),
    Column("question_type", String(20), nullable=False),
    Column("modality", String(16), nullable=False),
    Column("usage_count", Integer, nullable=False),
    Column("success_count", Integer, nullable=False),
    Column("pinned", Boolean, nullable=False, server_default="0"),
    Column("provenance", JSON, nullable=False),
    Column("question_embedding", LargeBinary, nullable=False),
    Column("caption_embedding", LargeBinary, nullable=True),
    Column("created_at", DateTime, nullable=False),  # naive UTC
    Column("updated_at", DateTime, nullable=False),
    UniqueConstraint("namespace", "id", name="uq_memories_namespace_id"),
    Index("ix_memories_namespace_modality", "namespace", "modality"),
    sqlite_autoincrement=True,  # row ids never reused: the vector index relies on them growing
)

memory_history = Table(
    "memory_history",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("memory_id", String(36), nullable=False),
    Column("namespace", String(200), nullable=False),
    Column("action", String(20), nullable=False),
    Column("before", JSON, nullable=True),
    Column("after", JSON, nullable=True),
    Column("actor", String(200), nullable=False),
    Column("created_at", DateTime, nullable=False),
    Index("ix_memory_history_namespace_memory", "namespace", "memory_id"),
    sqlite_autoincrement=True,
)

# Bumped in every write transaction; a process whose index saw another version reloads it.
namespace_versions = Table(
    "namespace_versions",
    metadata,
    Column("namespace", String(200), primary_key=True),
    Column("version", BigInteger, nullable=False),
)

# One row per verdict applied with MemoryStore.record_verdict: a replay of the same key is a no-op.
recorded_verdicts = Table(
    "recorded_verdicts",
    metadata,
    Column("namespace", String(200), primary_key=True),
    Column("key", String(64), primary_key=True),
    Column("created_at", DateTime, nullable=False),
)
