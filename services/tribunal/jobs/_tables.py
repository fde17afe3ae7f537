"""The tables of bulk labelling jobs, on the store's shared metadata (SQLite or PostgreSQL).

``job_items`` is keyed by (job, item_id): adding an input twice inserts nothing, and a
result is written by a conditional UPDATE (only while ``finished_at`` is null), so a job
killed at any point and resumed labels every item exactly once. A runner claims the items
it labels with a lease (owner, expiry), so concurrent runners split the work; a lease
that expires (its runner died) frees the item for another. The schema is changed by the
store's migrations (``tribunal.core.storage.migrations``), not by these classes.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from sqlalchemy import JSON, DateTime, Float, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from ..core.storage import Base

__all__ = ["JobItemRow", "LabelJobRow"]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LabelJobRow(Base):
    """One named labelling job: how it runs and what it reads."""

    __tablename__ = "label_jobs"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16))
    """``judge``, ``cascade`` or ``debate`` (the Gateway.Label modes)."""
    settings: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """Profile, models and thresholds the job was started with (provenance)."""
    source: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    """The input: format and paths."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_utcnow)
    status: Mapped[str] = mapped_column(String(16), default="created")
    """``created`` → ``running`` → ``done`` (every item finished) or ``stopped``."""


class JobItemRow(Base):
    """One item of a job: the input, and the result once labelled (null until then)."""

    __tablename__ = "job_items"

    job: Mapped[str] = mapped_column(String(128), primary_key=True)
    item_id: Mapped[str] = mapped_column(String(256), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    """Order in the input: pending items run, and exports list, in input order."""
    query_id: Mapped[str] = mapped_column(String(128), default="")
    doc_id: Mapped[str] = mapped_column(String(256), default="")
    query: Mapped[str] = mapped_column(Text)
    chunk: Mapped[str] = mapped_column(Text)
    answers: Mapped[list[str]] = mapped_column(JSON, default=list)
    gold: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """The input qrels' grade, when it judged the pair; null marks a hole."""
    # -- result (null until the item is finished) -----------------------------------------
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    """1 relevant, 0 irrelevant; null when the item went to the human queue."""
    source: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """``JUDGES``, ``DEBATE`` or ``HUMAN_QUEUE``."""
    p_relevant: Mapped[float | None] = mapped_column(Float, nullable=True)
    outcome: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """The debate's outcome when it ran (``AGREED``, ``ESCALATED``, ...)."""
    tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    escalation_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    audit_id: Mapped[str | None] = mapped_column(String(32), nullable=True)
    finished_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    # -- human review (the aggregation of human votes writes these) ---------------------------
    human_label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    human_method: Mapped[str | None] = mapped_column(String(32), nullable=True)
    # -- work sharing and failures ---------------------------------------------------------------
    lease_owner: Mapped[str | None] = mapped_column(String(64), nullable=True)
    """The runner labelling the item now (null: nobody)."""
    lease_expires_at: Mapped[dt.datetime | None] = mapped_column(
        DateTime(timezone=True), nullable=True
    )
    """When the lease lapses and another runner may take the item."""
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    """Why the item failed (source ``FAILED``): an input the pipeline refuses, say."""

    __table_args__ = (
        Index("ix_job_items_pending", "job", "finished_at", "position"),
        Index("ix_job_items_escalation", "escalation_id"),
    )
