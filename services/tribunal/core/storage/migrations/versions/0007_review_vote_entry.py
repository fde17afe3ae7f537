"""Review votes on an audited fallback name the entry that answers the query (or none).

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("review_votes", sa.Column("entry_id", sa.String(256), nullable=True))
    # An attention check in that form: the entry it expects ("" for none).
    op.add_column("review_votes", sa.Column("expected_entry_id", sa.String(256), nullable=True))


def downgrade() -> None:
    op.drop_column("review_votes", "expected_entry_id")
    op.drop_column("review_votes", "entry_id")
