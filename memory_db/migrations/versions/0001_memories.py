"""The memories table: question, workflow summary, plan, label, counters, embeddings.

Revision ID: 0001_memories
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001_memories"
down_revision = None
branch_labels = None
depends_on = None

RowId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("row_id", RowId, primary_key=True, autoincrement=True),
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("namespace", sa.String(200), nullable=False),
        sa.Column("question", sa.Text, nullable=False),
        sa.Column("caption", sa.Text, nullable=True),
        sa.Column("summary", sa.Text, nullable=False),
        sa.Column("plan", sa.Text, nullable=False),
        sa.Column("correct", sa.Boolean, nullable=False),
        sa.Column("question_type", sa.String(20), nullable=False),
        sa.Column("modality", sa.String(16), nullable=False),
        sa.Column("usage_count", sa.Integer, nullable=False),
        sa.Column("success_count", sa.Integer, nullable=False),
        sa.Column("provenance", sa.JSON, nullable=False),
        sa.Column("question_embedding", sa.LargeBinary, nullable=False),
        sa.Column("caption_embedding", sa.LargeBinary, nullable=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
        sa.Column("updated_at", sa.DateTime, nullable=False),
        sa.UniqueConstraint("namespace", "id", name="uq_memories_namespace_id"),
        sqlite_autoincrement=True,  # row ids never reused: the vector index relies on them growing
    )
    op.create_index("ix_memories_namespace_modality", "memories", ["namespace", "modality"])


def downgrade() -> None:
    op.drop_index("ix_memories_namespace_modality", table_name="memories")
    op.drop_table("memories")
