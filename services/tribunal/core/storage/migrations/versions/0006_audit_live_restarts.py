"""The live audit's restarted sequences: each live state also carries the bound of its
latest restarted sequence (started when the shift warning came on, or on a schedule).

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("restarts", sa.Integer(), "0"),
    ("restart_accepted", sa.Integer(), "0"),
    ("restart_audited", sa.Integer(), "0"),
    ("restart_wrong", sa.Integer(), "0"),
    ("restart_lower", sa.Float(), "0"),
    ("restart_upper", sa.Float(), "1"),
)


def upgrade() -> None:
    # Adding columns is not an UPDATE: the append-only triggers stay as they are; the rows
    # written before read as "no restart yet" through the server defaults.
    for name, kind, default in _COLUMNS:
        op.add_column(
            "audit_live_states",
            sa.Column(name, kind, nullable=False, server_default=sa.text(default)),
        )
    op.add_column(
        "audit_live_states", sa.Column("restart_at", sa.DateTime(timezone=True), nullable=True)
    )


def downgrade() -> None:
    for name in ("restart_at", *(name for name, _, _ in reversed(_COLUMNS))):
        op.drop_column("audit_live_states", name)
