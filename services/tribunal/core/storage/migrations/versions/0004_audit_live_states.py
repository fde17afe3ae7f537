"""The live audit's states: each collection's live bound, shift test and serving mode
(append-only, like the decisions: a switch into a safe mode is itself audited).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_SQLITE_APPEND_ONLY = [
    "CREATE TRIGGER IF NOT EXISTS audit_live_states_no_update BEFORE UPDATE ON "
    "audit_live_states BEGIN SELECT RAISE(ABORT, 'audit_live_states is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS audit_live_states_no_delete BEFORE DELETE ON "
    "audit_live_states BEGIN SELECT RAISE(ABORT, 'audit_live_states is append-only'); END",
]
_POSTGRES_APPEND_ONLY = [
    # The function is revision 0001's (audit_decisions uses it too).
    "DROP TRIGGER IF EXISTS audit_live_states_append_only ON audit_live_states",
    "CREATE TRIGGER audit_live_states_append_only BEFORE UPDATE OR DELETE ON "
    "audit_live_states FOR EACH ROW EXECUTE FUNCTION tribunal_append_only()",
]


def upgrade() -> None:
    op.create_table(
        "audit_live_states",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("collection", sa.String(128), nullable=False),
        sa.Column("calibrator_version", sa.String(64), nullable=False),
        sa.Column("alpha", sa.Float(), nullable=False),
        sa.Column("delta", sa.Float(), nullable=False),
        sa.Column("accepted", sa.Integer(), nullable=False),
        sa.Column("audited", sa.Integer(), nullable=False),
        sa.Column("wrong", sa.Integer(), nullable=False),
        sa.Column("lower", sa.Float(), nullable=False),
        sa.Column("upper", sa.Float(), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("shift_p_value", sa.Float(), nullable=True),
        sa.Column("shift_warning", sa.Boolean(), nullable=False),
        sa.Column("actor", sa.String(128), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index(
        "ix_audit_live_states_collection", "audit_live_states", ["collection", "created_at"]
    )
    bind = op.get_bind()
    for statement in (
        _POSTGRES_APPEND_ONLY if bind.dialect.name == "postgresql" else _SQLITE_APPEND_ONLY
    ):
        op.execute(statement)


def downgrade() -> None:
    op.drop_table("audit_live_states")
