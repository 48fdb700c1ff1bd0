"""Sources a person struck as wrong, per namespace: not retrieved again there until the strike is undone.

Revision ID: 0009_struck_sources
Revises: 0008_login_failures
"""
import sqlalchemy as sa
from alembic import op

revision = "0009_struck_sources"
down_revision = "0008_login_failures"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "struck_sources",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("namespace", sa.String(200), nullable=False),
        sa.Column("key", sa.String(1000), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("title", sa.Text, nullable=False),
        sa.Column("source", sa.String(200), nullable=False),
        sa.Column("url", sa.Text, nullable=True),
        sa.Column("sentence", sa.Text, nullable=True),
        sa.Column("memory_id", sa.String(36), nullable=True),
        sa.Column("run_id", sa.String(200), nullable=True),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("active", sa.Boolean, nullable=False),
        sa.Column("strike_history_id", sa.BigInteger, nullable=True),
        sa.Column("unstrike_history_id", sa.BigInteger, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("namespace", "key", name="uq_struck_sources_namespace_key"),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("struck_sources")
