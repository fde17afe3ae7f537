"""Reviewed queries linked to the KB entry that answers them (phrasings to approve).

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "kb_phrasing_links",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("collection", sa.String(128), nullable=False),
        sa.Column("entry_id", sa.String(256), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("query_sha256", sa.String(64), nullable=False),
        sa.Column("audit_id", sa.String(32), nullable=False),
        sa.Column("proposed_by", sa.String(128), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("decided_by", sa.String(128), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("kb_version", sa.BigInteger(), nullable=False),
        sa.UniqueConstraint(
            "collection", "entry_id", "query_sha256", name="uq_kb_phrasing_links_query"
        ),
    )
    op.create_index(
        "ix_kb_phrasing_links_status", "kb_phrasing_links", ["collection", "status", "created_at"]
    )


def downgrade() -> None:
    op.drop_table("kb_phrasing_links")
