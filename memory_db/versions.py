"""Per-namespace change counters shared by every process that opens the database."""
from __future__ import annotations

from sqlalchemy import Connection, select
from sqlalchemy.dialects import postgresql, sqlite

from .schema import namespace_versions


def read_version(conn: Connection, namespace: str) -> int:
    found = conn.execute(
        select(namespace_versions.c.version).where(namespace_versions.c.namespace == namespace)
    ).scalar_one_or_none()
    return int(found or 0)


def bump_version(conn: Connection, namespace: str) -> int:
    """Add one to the namespace's counter inside the caller's write transaction; returns it."""
    dialect = postgresql if conn.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(namespace_versions).values(namespace=namespace, version=1)
    statement = statement.on_conflict_do_update(
        index_elements=[namespace_versions.c.namespace],
        set_={"version": namespace_versions.c.version + 1},
    ).returning(namespace_versions.c.version)
    return int(conn.execute(statement).scalar_one())
