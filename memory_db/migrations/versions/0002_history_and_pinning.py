"""Pinned memories and the change history (every edit recorded, reversible).

Revision ID: 0002_history_and_pinning
Revises: 0001_memories
"""
import sqlalchemy as sa
from alembic import op

revision = "0002_history_and_pinning"
down_revision = "0001_memories"
branch_labels = None
depends_on = None

RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("pinned", sa.Boolean, nullable=False, server_default="0"))
    op.create_table(
        "memory_history",
        sa.Column("id", RowId, primary_key=True, autoincrement=True),
        sa.Column("memory_id", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(200), nullable=False),
        sa.Column("action", sa.String(20), nullable=False),
        sa.Column("before", sa.JSON, nullable=True),
        sa.Column("after", sa.JSON, nullable=True),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sqlite_autoincrement=True,
    )
    op.create_index(
        "ix_memory_history_namespace_memory", "memory_history", ["namespace", "memory_id"]
    )


def downgrade() -> None:
    op.drop_index("ix_memory_history_namespace_memory", table_name="memory_history")
    op.drop_table("memory_history")
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("pinned")
