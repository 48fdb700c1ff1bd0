"""Test-time learning's queue and the learner's lease move into the database.

Revision ID: 0006_learning_queue
Revises: 0005_pgvector
"""
import sqlalchemy as sa
from alembic import op

revision = "0006_learning_queue"
down_revision = "0005_pgvector"
branch_labels = None
depends_on = None

RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "learning_queue",
        sa.Column("seq", RowId, primary_key=True, autoincrement=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("namespace", sa.String(200), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("run_id", sa.String(200), nullable=False),
        sa.Column("item", sa.Text, nullable=False),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("taken_at", sa.DateTime, nullable=True),
        sa.Column("taken_by", sa.String(200), nullable=True),
        sqlite_autoincrement=True,
    )
    op.create_index("ix_learning_queue_namespace_run", "learning_queue", ["namespace", "run_id"])
    op.create_index("ix_learning_queue_untaken", "learning_queue", ["taken_at", "seq"])
    op.create_table(
        "learner_leases",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("owner", sa.String(200), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime, nullable=True),
        sa.Column("paused", sa.Boolean, nullable=False, server_default="0"),
        sa.Column("yield_until", sa.DateTime, nullable=True),
        sa.Column("status", sa.Text, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("learner_leases")
    op.drop_index("ix_learning_queue_untaken", "learning_queue")
    op.drop_index("ix_learning_queue_namespace_run", "learning_queue")
    op.drop_table("learning_queue")
