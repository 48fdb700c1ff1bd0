"""Keys of the verdicts already applied, so replaying a verdict after a crash never applies it twice.

Revision ID: 0004_recorded_verdicts
Revises: 0003_namespace_versions
"""
import sqlalchemy as sa
from alembic import op

revision = "0004_recorded_verdicts"
down_revision = "0003_namespace_versions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "recorded_verdicts",
        sa.Column("namespace", sa.String(200), primary_key=True),
        sa.Column("key", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.DateTime, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("recorded_verdicts")
