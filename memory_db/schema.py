"""Database tables (SQLAlchemy Core). Alembic migrations in memory_db/migrations build them."""
from __future__ import annotations

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Float,
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

# Test-time learning's queue: people's feedback (kind "feedback") and questions to learn from (kind
# "signal"), in order. A feedback row is inserted in the transaction that applies its verdict; the
# learner marks rows taken once it has them (taken_at), so a restarted learner reads the rest. A row
# it cannot read is quarantined: taken, kept, with `quarantine` saying why, so it never blocks the rest.
learning_queue = Table(
    "learning_queue",
    metadata,
    Column("seq", RowId, primary_key=True, autoincrement=True),
    Column("key", String(64), nullable=False, unique=True),
    Column("namespace", String(200), nullable=False),
    Column("kind", String(16), nullable=False),
    Column("run_id", String(200), nullable=False),
    Column("item", Text, nullable=False),  # JSON, as the caller wrote it
    Column("created_at", DateTime, nullable=False),
    Column("taken_at", DateTime, nullable=True),
    Column("taken_by", String(200), nullable=True),
    Column("quarantine", Text, nullable=True),
    Index("ix_learning_queue_namespace_run", "namespace", "run_id"),
    Index("ix_learning_queue_untaken", "taken_at", "seq"),
    sqlite_autoincrement=True,
)

# One row per learner of a deployment: who holds it (owner, heartbeat, and fence_token, counted up by
# every acquire, which the holder's writes check), what it publishes for the app's Learning view
# (status), and what the app asks of it (paused; yield_until while users' runs go).
learner_leases = Table(
    "learner_leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("owner", String(200), nullable=True),
    Column("heartbeat_at", DateTime, nullable=True),
    Column("paused", Boolean, nullable=False, server_default="0"),
    Column("yield_until", DateTime, nullable=True),
    Column("status", Text, nullable=True),
    Column("fence_token", BigInteger, nullable=False, server_default="0"),
)

# Sources a person struck as wrong, per namespace (memory_db.struck): a passage by its stable key
# (backend.tools.struck) or a memory ("memory:<id>"). A struck source is not retrieved in its namespace
# while `active`; undoing the strike clears `active` and keeps the row, so undoing that brings it back.
# `strike_history_id` / `unstrike_history_id`: the memory_history entries that record the last strike
# and its undo on `memory_id` (the struck memory, or the memory of the run whose citation was struck).
struck_sources = Table(
    "struck_sources",
    metadata,
    Column("id", RowId, primary_key=True, autoincrement=True),
    Column("namespace", String(200), nullable=False),
    Column("key", String(1000), nullable=False),
    Column("kind", String(16), nullable=False),  # "passage" | "memory"
    Column("title", Text, nullable=False),
    Column("source", String(200), nullable=False),
    Column("url", Text, nullable=True),
    Column("sentence", Text, nullable=True),
    Column("memory_id", String(36), nullable=True),
    Column("run_id", String(200), nullable=True),
    Column("actor", String(200), nullable=False),
    Column("active", Boolean, nullable=False),
    Column("strike_history_id", BigInteger, nullable=True),
    Column("unstrike_history_id", BigInteger, nullable=True),
    Column("created_at", DateTime, nullable=False),
    Column("updated_at", DateTime, nullable=False),
    UniqueConstraint("namespace", "key", name="uq_struck_sources_namespace_key"),
    sqlite_autoincrement=True,
)

# Wrong-password counts per sign-in key ("user:NAME", "address:IP"), shared by every app process
# (memory_db.login_failures); times are seconds since the epoch.
login_failures = Table(
    "login_failures",
    metadata,
    Column("key", String(200), primary_key=True),
    Column("failures", Integer, nullable=False),
    Column("locked_until", Float, nullable=False),
    Column("expires_at", Float, nullable=False),
    Index("ix_login_failures_expires_at", "expires_at"),
)
