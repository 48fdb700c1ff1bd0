"""Wrong-password counts move into the database, so that every app process shares a sign-in lock.

Revision ID: 0008_login_failures
Revises: 0007_quarantine_and_fence
"""
import sqlalchemy as sa
from alembic import op

revision = "0008_login_failures"
down_revision = "0007_quarantine_and_fence"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "login_failures",
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("failures", sa.Integer, nullable=False),
        sa.Column("locked_until", sa.Float, nullable=False),
        sa.Column("expires_at", sa.Float, nullable=False),
    )
    op.create_index("ix_login_failures_expires_at", "login_failures", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_login_failures_expires_at", "login_failures")
    op.drop_table("login_failures")
