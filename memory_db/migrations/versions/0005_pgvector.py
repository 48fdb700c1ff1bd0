"""On PostgreSQL with the pgvector extension: vector(384) columns, an HNSW index, search in SQL.

SQLite, and a PostgreSQL where the `vector` extension cannot be created, are left as they are
(the store then searches in process; MemoryStore logs why, and retries this on every open).

Revision ID: 0005_pgvector
Revises: 0004_recorded_verdicts
"""
from alembic import op

from memory_db.pgvector import disable_vectors, enable_vectors

revision = "0005_pgvector"
down_revision = "0004_recorded_verdicts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name == "postgresql":
        enable_vectors(bind)


def downgrade() -> None:
    disable_vectors(op.get_bind())
