"""Opening the database: engine options per backend, SQLite pragmas, schema migrations."""
from __future__ import annotations

import sqlite3
import time

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from .errors import MemoryStoreError

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
SQLITE_BUSY_TIMEOUT_MS = 30_000


def open_engine(url: str) -> Engine:
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise MemoryStoreError(
            f"Memory database URL {url!r} is not valid; use sqlite:///path/to/memory.db "
            "or postgresql+psycopg://user:password@host/dbname."
        ) from exc
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            raise MemoryStoreError(
                "An in-memory SQLite database cannot be shared between connections; "
                "give a file path: sqlite:///path/to/memory.db."
            )
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            parsed,
            connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
            pool_size=8,
            max_overflow=16,
        )
        _configure_sqlite(engine)
        return engine
    if backend == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        # No server-side prepared statements: psycopg prepares a query after 5 runs, and PostgreSQL's
        # generic plan for a vector parameter scans the whole HNSW graph (1 ms became 10-20 ms).
        return create_engine(parsed, pool_size=8, max_overflow=16, pool_pre_ping=True,
                             connect_args={"prepare_threshold": None})
    raise MemoryStoreError(
        f"Memory database backend {backend!r} is not supported; use sqlite or postgresql."
    )


def _use_wal(cursor) -> None:
    """Switch the database file to write-ahead logging (it stays so). SQLite answers "database is
    locked" at once, without waiting its busy timeout, when another process holds a lock as the mode
    changes (processes opening a fresh database together): retry until the busy timeout is spent."""
    deadline = time.monotonic() + SQLITE_BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            if str(cursor.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(0.02)


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # Let SQLAlchemy's "begin" event emit BEGIN itself (pysqlite's own is deferred and late).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        _use_wal(cursor)
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")  # WAL + NORMAL survives a process crash
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        # Writers take the write lock up front, so two writers never deadlock on lock upgrade.
        if conn.get_execution_options().get("sqlite_write"):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


# Held while migrating, so app processes starting together on a fresh PostgreSQL do not race.
MIGRATION_LOCK_KEY = 7_120_440_503


def migrate(engine: Engine, revision: str = "head") -> None:
    """Bring the schema up to `revision` (Alembic, run in-process on open). Processes opening the
    same database at once migrate one after the other (SQLite's write lock, a PostgreSQL advisory
    lock); the later ones find the schema current."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with engine.execution_options(sqlite_write=True).begin() as connection:
        if connection.dialect.name == "postgresql":
            connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    from alembic.runtime.migration import MigrationContext

    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()
