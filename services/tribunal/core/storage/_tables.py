"""The tables (SQLAlchemy 2 declarative): audit decisions and escalations.

Label jobs, labels and human judgments (the bulk labelling issue) join this
metadata when they exist. Types are portable: the same schema runs on SQLite
(the embedded default) and PostgreSQL.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, BigInteger, DateTime, Float, Index, String, Text, UniqueConstraint
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = ["AuditDecisionRow", "Base", "EscalationRow", "KbChangeRow", "KbPhrasingLinkRow"]


class Base(DeclarativeBase):
    """Metadata shared by every Tribunal table."""


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class AuditDecisionRow(Base):
    """One gateway decision: append-only (triggers refuse UPDATE and DELETE)."""

    __tablename__ = "audit_decisions"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_utcnow)
    kind: Mapped[str] = mapped_column(String(16))
    request_id: Mapped[str] = mapped_column(String(128), default="")
    query: Mapped[str] = mapped_column(Text)
    collection: Mapped[str] = mapped_column(String(128), default="")
    decision: Mapped[str] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(String(64), default="")
    failed_stage: Mapped[str] = mapped_column(String(32), default="")
    error: Mapped[str] = mapped_column(Text, default="")
    confidence: Mapped[float | None] = mapped_column(Float, nullable=True)
    threshold: Mapped[float | None] = mapped_column(Float, nullable=True)
    kb_entry_id: Mapped[str] = mapped_column(String(256), default="")
    candidate_ids: Mapped[list[str]] = mapped_column(JSON, default=list)
    signals: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    versions: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    latencies_ms: Mapped[dict[str, float]] = mapped_column(JSON, default=dict)
    total_ms: Mapped[float] = mapped_column(Float, default=0.0)
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    __table_args__ = (
        Index("ix_audit_decisions_created_at", "created_at"),
        Index("ix_audit_decisions_kind_decision", "kind", "decision"),
    )


class EscalationRow(Base):
    """An item handed to humans; keyed by content so a retried request adds no duplicate."""

    __tablename__ = "escalations"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_utcnow)
    item_id: Mapped[str] = mapped_column(String(256), default="")
    query: Mapped[str] = mapped_column(Text)
    chunk: Mapped[str] = mapped_column(Text)
    answers: Mapped[list[str]] = mapped_column(JSON, default=list)
    reason: Mapped[str] = mapped_column(String(64))
    history: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    audit_id: Mapped[str] = mapped_column(String(32), default="")
    status: Mapped[str] = mapped_column(String(16), default="open")

    __table_args__ = (Index("ix_escalations_status", "status", "created_at"),)


class KbChangeRow(Base):
    """One change of one KB entry (or of a collection's policy), by whom, to which
    version: append-only (triggers refuse UPDATE and DELETE)."""

    __tablename__ = "kb_changes"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_utcnow)
    actor: Mapped[str] = mapped_column(String(128))
    """The credential's name (``cli:<user>`` for the command line)."""
    collection: Mapped[str] = mapped_column(String(128))
    entry_id: Mapped[str] = mapped_column(String(256), default="")
    """Empty for a change of the collection's policy."""
    op: Mapped[str] = mapped_column(String(16))
    """``upsert``, ``delete`` or ``policy``."""
    before_sha256: Mapped[str] = mapped_column(String(64), default="")
    """The entry version replaced or deleted; empty when there was none."""
    after_sha256: Mapped[str] = mapped_column(String(64), default="")
    """The entry version written; empty for a delete."""
    kb_version: Mapped[int] = mapped_column(BigInteger, default=0)
    """The collection's version (its change counter) once the change was applied."""
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)

    __table_args__ = (
        Index("ix_kb_changes_collection_entry", "collection", "entry_id", "created_at"),
        Index("ix_kb_changes_created_at", "created_at"),
    )


class KbPhrasingLinkRow(Base):
    """A reviewed query linked to the KB entry that answers it: proposed on the review
    page, then approved (the query becomes a phrasing of the entry, an audited KB change)
    or rejected by an admin. One row per (collection, entry, query)."""

    __tablename__ = "kb_phrasing_links"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_utcnow)
    collection: Mapped[str] = mapped_column(String(128))
    entry_id: Mapped[str] = mapped_column(String(256))
    query: Mapped[str] = mapped_column(Text)
    query_sha256: Mapped[str] = mapped_column(String(64))
    """sha256 of the query with case and spacing normalised (the uniqueness key)."""
    audit_id: Mapped[str] = mapped_column(String(32), default="")
    """The gateway decision the query comes from (empty when added by hand)."""
    proposed_by: Mapped[str] = mapped_column(String(128))
    """The annotator (review page) or ``cli:<user>`` who linked it."""
    status: Mapped[str] = mapped_column(String(16), default="pending")
    """``pending``, ``approved`` or ``rejected``."""
    decided_by: Mapped[str] = mapped_column(String(128), default="")
    decided_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    reason: Mapped[str] = mapped_column(Text, default="")
    """Why it was rejected (or a note on the approval)."""
    kb_version: Mapped[int] = mapped_column(BigInteger, default=0)
    """The collection's version once the approved phrasing was written (0 otherwise)."""

    __table_args__ = (
        UniqueConstraint(
            "collection", "entry_id", "query_sha256", name="uq_kb_phrasing_links_query"
        ),
        Index("ix_kb_phrasing_links_status", "collection", "status", "created_at"),
    )
