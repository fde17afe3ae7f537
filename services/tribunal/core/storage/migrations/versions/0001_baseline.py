"""The schema before migrations: audit decisions, escalations, label jobs, review votes.

Creates only what is missing, so a database that Tribunal built with ``create_all``
(every table, or the ones it had used) upgrades in place.

Revision ID: 0001
Revises: (none)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_SQLITE_APPEND_ONLY = [
    "CREATE TRIGGER IF NOT EXISTS audit_decisions_no_update BEFORE UPDATE ON audit_decisions "
    "BEGIN SELECT RAISE(ABORT, 'audit_decisions is append-only'); END",
    "CREATE TRIGGER IF NOT EXISTS audit_decisions_no_delete BEFORE DELETE ON audit_decisions "
    "BEGIN SELECT RAISE(ABORT, 'audit_decisions is append-only'); END",
]
_POSTGRES_APPEND_ONLY = [
    "CREATE OR REPLACE FUNCTION tribunal_append_only() RETURNS trigger AS $$ "
    "BEGIN RAISE EXCEPTION '% is append-only', TG_TABLE_NAME; END; $$ LANGUAGE plpgsql",
    "DROP TRIGGER IF EXISTS audit_decisions_append_only ON audit_decisions",
    "CREATE TRIGGER audit_decisions_append_only BEFORE UPDATE OR DELETE ON audit_decisions "
    "FOR EACH ROW EXECUTE FUNCTION tribunal_append_only()",
]


def _when() -> sa.DateTime:
    return sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "audit_decisions",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("request_id", sa.String(128), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("collection", sa.String(128), nullable=False),
        sa.Column("decision", sa.String(32), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("failed_stage", sa.String(32), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("kb_entry_id", sa.String(256), nullable=False),
        sa.Column("candidate_ids", sa.JSON(), nullable=False),
        sa.Column("signals", sa.JSON(), nullable=False),
        sa.Column("versions", sa.JSON(), nullable=False),
        sa.Column("latencies_ms", sa.JSON(), nullable=False),
        sa.Column("total_ms", sa.Float(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
        if_not_exists=True,
    )
    op.create_index(
        "ix_audit_decisions_created_at", "audit_decisions", ["created_at"], if_not_exists=True
    )
    op.create_index(
        "ix_audit_decisions_kind_decision",
        "audit_decisions",
        ["kind", "decision"],
        if_not_exists=True,
    )
    op.create_table(
        "escalations",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("item_id", sa.String(256), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("chunk", sa.Text(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("history", sa.JSON(), nullable=False),
        sa.Column("audit_id", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        if_not_exists=True,
    )
    op.create_index(
        "ix_escalations_status", "escalations", ["status", "created_at"], if_not_exists=True
    )
    op.create_table(
        "label_jobs",
        sa.Column("name", sa.String(128), primary_key=True),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("source", sa.JSON(), nullable=False),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        if_not_exists=True,
    )
    op.create_table(
        "job_items",
        sa.Column("job", sa.String(128), primary_key=True),
        sa.Column("item_id", sa.String(256), primary_key=True),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("query_id", sa.String(128), nullable=False),
        sa.Column("doc_id", sa.String(256), nullable=False),
        sa.Column("query", sa.Text(), nullable=False),
        sa.Column("chunk", sa.Text(), nullable=False),
        sa.Column("answers", sa.JSON(), nullable=False),
        sa.Column("gold", sa.Integer(), nullable=True),
        sa.Column("label", sa.Integer(), nullable=True),
        sa.Column("source", sa.String(16), nullable=True),
        sa.Column("p_relevant", sa.Float(), nullable=True),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("tokens", sa.Integer(), nullable=True),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.Column("escalation_id", sa.String(32), nullable=True),
        sa.Column("audit_id", sa.String(32), nullable=True),
        sa.Column("finished_at", _when(), nullable=True),
        sa.Column("human_label", sa.Integer(), nullable=True),
        sa.Column("human_method", sa.String(32), nullable=True),
        if_not_exists=True,
    )
    op.create_index(
        "ix_job_items_pending",
        "job_items",
        ["job", "finished_at", "position"],
        if_not_exists=True,
    )
    op.create_index("ix_job_items_escalation", "job_items", ["escalation_id"], if_not_exists=True)
    op.create_table(
        "review_votes",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("item_key", sa.String(160), nullable=False),
        sa.Column("job", sa.String(128), nullable=True),
        sa.Column("annotator", sa.String(128), nullable=False),
        sa.Column("label", sa.String(16), nullable=False),
        sa.Column("is_attention", sa.Boolean(), nullable=False),
        sa.Column("expected_label", sa.String(16), nullable=True),
        sa.Column("created_at", _when(), nullable=False),
        sa.Column("seconds", sa.Float(), nullable=True),
        sa.UniqueConstraint("item_key", "annotator", name="uq_review_votes_item_annotator"),
        if_not_exists=True,
    )
    op.create_index("ix_review_votes_annotator", "review_votes", ["annotator"], if_not_exists=True)
    dialect = op.get_bind().dialect.name
    for statement in _POSTGRES_APPEND_ONLY if dialect == "postgresql" else _SQLITE_APPEND_ONLY:
        op.execute(statement)


def downgrade() -> None:
    raise NotImplementedError("the baseline is not reversed: drop the database instead")
