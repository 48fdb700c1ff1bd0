"""Alembic environment: run by memory_db.database.migrate() on an existing connection."""
from alembic import context

from memory_db.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError(
        "memory_db migrations run programmatically: open the database with "
        "memory_db.MemoryStore(url), which upgrades the schema."
    )

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
