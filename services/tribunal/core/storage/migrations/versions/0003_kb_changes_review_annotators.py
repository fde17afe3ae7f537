"""The KB change audit (append-only, like the decisions) and the review page's annotators.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

_SQLITE_APPEND_ONLY = [
    "CREATE TRIGGER IF NOT EXISTS kb_changes_no_update BEFORE UPDATE ON kb_changes "
    "BEGIN SELECT RAISE(ABORT, 'kb_changes is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS kb_changes_no_delete BEFORE DELETE ON kb_changes "
    "BEGIN SELECT RAISE(ABORT, 'kb_changes is append-only'); END",
]
_POSTGRES_APPEND_ONLY = [
    # The function is revision 0001's (audit_decisions uses it too).
    "DROP TRIGGER IF EXISTS kb_changes_append_only ON kb_changes",
    "CREATE TRIGGER kb_changes_append_only BEFORE UPDATE OR DELETE ON kb_changes "
    "FOR EACH ROW EXECUTE FUNCTION tribunal_append_only()",
]


def _when() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "kb_changes",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("collection", sa.String(128), nullable=False),
        sa.Column("entry_id", sa.String(256), nullable=False),
        sa.Column("op", sa.String(16), nullable=False),
        sa.Column("before_sha256", sa.String(64), nullable=False),
        sa.Column("after_sha256", sa.String(64), nullable=False),
        sa.Column("kb_version", sa.BigInteger(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index(
        "ix_kb_changes_collection_entry", "kb_changes", ["collection", "entry_id", "created_at"]
    )
    op.create_index("ix_kb_changes_created_at", "kb_changes", ["created_at"])
    bind = op.get_bind()
    for statement in (
        _POSTGRES_APPEND_ONLY if bind.dialect.name == "postgresql" else _SQLITE_APPEND_ONLY
    ):
        op.execute(statement)
    op.create_table(
        "review_annotators",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("key_sha256", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("revoked_at", _when(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("review_annotators")
    op.drop_table("kb_changes")
