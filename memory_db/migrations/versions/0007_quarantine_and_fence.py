"""A learning-queue row the learner cannot read is quarantined with its reason; the learner lease
carries a fencing token that every acquire counts up.

Revision ID: 0007_quarantine_and_fence
Revises: 0006_learning_queue
"""
import sqlalchemy as sa
from alembic import op

revision = "0007_quarantine_and_fence"
down_revision = "0006_learning_queue"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("learning_queue") as batch:
        batch.add_column(sa.Column("quarantine", sa.Text, nullable=True))
    with op.batch_alter_table("learner_leases") as batch:
        batch.add_column(sa.Column("fence_token", sa.BigInteger, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("learner_leases") as batch:
        batch.drop_column("fence_token")
    with op.batch_alter_table("learning_queue") as batch:
        batch.drop_column("quarantine")
