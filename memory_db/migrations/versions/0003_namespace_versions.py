"""A change counter per namespace, so every process notices writes made by another one.

Revision ID: 0003_namespace_versions
Revises: 0002_history_and_pinning
"""
import sqlalchemy as sa
from alembic import op

revision = "0003_namespace_versions"
down_revision = "0002_history_and_pinning"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "namespace_versions",
        sa.Column("namespace", sa.String(200), primary_key=True),
        sa.Column("version", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("namespace_versions")
