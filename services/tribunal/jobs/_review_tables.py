"""The human review votes, on the store's shared metadata (SQLite or PostgreSQL).

One row per (item, annotator): the unique key makes a double submit (a second
click, a retried request) a no-op, and it is what guarantees that an annotator
labels an item at most once. Attention-check votes carry the expected label, so
an annotator's attention accuracy is computed from this table alone.
"""

from __future__ import annotations

import datetime as dt

from sqlalchemy import Boolean, DateTime, Float, Index, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from ..core.storage import Base

__all__ = ["ReviewAnnotatorRow", "ReviewVoteRow"]


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ReviewVoteRow(Base):
    """One annotator's label for one review item (an escalation or an attention check)."""

    __tablename__ = "review_votes"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    item_key: Mapped[str] = mapped_column(String(160))
    """The escalation id, or ``attention:<id>`` for an attention-check item."""
    job: Mapped[str | None] = mapped_column(String(128), nullable=True)
    """The labelling job the review session served (``--job``), if any."""
    annotator: Mapped[str] = mapped_column(String(128))
    label: Mapped[str] = mapped_column(String(16))
    """``relevant`` or ``irrelevant``."""
    entry_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    """On an audited fallback: the entry the annotator picked as the one that answers the
    query (label ``relevant``); null with ``irrelevant`` ("none does") and elsewhere."""
    expected_entry_id: Mapped[str | None] = mapped_column(String(256), nullable=True)
    """The known answer of an attention check shown as an audited fallback: the entry that
    answers ("" for none); null for every other vote."""
    is_attention: Mapped[bool] = mapped_column(Boolean, default=False)
    expected_label: Mapped[str | None] = mapped_column(String(16), nullable=True)
    """The known answer of an attention-check item; null for real items."""
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_utcnow)
    seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    """Time the annotator spent on the item (page shown → vote), as the browser measured."""

    __table_args__ = (
        UniqueConstraint("item_key", "annotator", name="uq_review_votes_item_annotator"),
        Index("ix_review_votes_annotator", "annotator"),
    )


class ReviewAnnotatorRow(Base):
    """An annotator allowed on the review page: the name votes are recorded under and the
    sha256 of the key they sign in with (``tribunal review add-annotator NAME``)."""

    __tablename__ = "review_annotators"

    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    key_sha256: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_utcnow)
    revoked_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    """Set by ``tribunal review remove-annotator``: the key no longer signs in (the votes stay)."""
