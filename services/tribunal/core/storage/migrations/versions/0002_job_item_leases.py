"""Label job items: a lease (owner, expiry) so that concurrent runners split the work,
and the reason an item failed (recorded instead of stopping the job).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("job_items", sa.Column("lease_owner", sa.String(64), nullable=True))
    op.add_column(
        "job_items", sa.Column("lease_expires_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("job_items", sa.Column("error", sa.Text(), nullable=True))


def downgrade() -> None:
    for column in ("error", "lease_expires_at", "lease_owner"):
        op.drop_column("job_items", column)
