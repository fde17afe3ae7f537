"""The live state of a collection: its latest bound, shift test and serving mode.

One append-only table: every change of a collection's live bound, shift warning or mode
is a new row (who wrote it, when, what it saw), so the switch into a safe mode is itself
audited. The latest row of a collection is its state; the gateway reads it per request.
A safe mode holds for the calibrator version it was shown on: a new artifact (another
version) serves normally until its own audits say otherwise. Besides the cumulative bound
a state carries its latest restarted sequence (see ``_restarts``): its number, start and
bound as columns, and every restart of the version in ``detail["restarts"]`` — the
monitor reads them back from the latest state, so a restart holds across processes.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, field, fields
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    Index,
    Integer,
    String,
    bindparam,
    select,
)
from sqlalchemy.orm import Mapped, mapped_column

from ..core.storage import Base, Database
from ._restarts import Restart, as_utc

__all__ = ["NORMAL", "LiveState", "LiveStateRow", "StateStore"]

NORMAL = "normal"


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LiveStateRow(Base):
    """One state of one collection (append-only: a change is a new row)."""

    __tablename__ = "audit_live_states"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    created_at: Mapped[dt.datetime] = mapped_column(DateTime(timezone=True), default=_utcnow)
    collection: Mapped[str] = mapped_column(String(128))
    calibrator_version: Mapped[str] = mapped_column(String(64))
    alpha: Mapped[float] = mapped_column(Float)
    delta: Mapped[float] = mapped_column(Float)
    accepted: Mapped[int] = mapped_column(Integer, default=0)
    audited: Mapped[int] = mapped_column(Integer, default=0)
    wrong: Mapped[int] = mapped_column(Integer, default=0)
    lower: Mapped[float] = mapped_column(Float, default=0.0)
    upper: Mapped[float] = mapped_column(Float, default=1.0)
    mode: Mapped[str] = mapped_column(String(16), default=NORMAL)
    shift_p_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    shift_warning: Mapped[bool] = mapped_column(Boolean, default=False)
    actor: Mapped[str] = mapped_column(String(128), default="")
    detail: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    restarts: Mapped[int] = mapped_column(Integer, default=0)
    restart_at: Mapped[dt.datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    restart_accepted: Mapped[int] = mapped_column(Integer, default=0)
    restart_audited: Mapped[int] = mapped_column(Integer, default=0)
    restart_wrong: Mapped[int] = mapped_column(Integer, default=0)
    restart_lower: Mapped[float] = mapped_column(Float, default=0.0)
    restart_upper: Mapped[float] = mapped_column(Float, default=1.0)

    __table_args__ = (Index("ix_audit_live_states_collection", "collection", "created_at"),)


@dataclass(frozen=True)
class LiveState:
    """A collection's live bound and serving mode, as written and read back."""

    collection: str
    calibrator_version: str
    alpha: float
    delta: float
    accepted: int = 0
    audited: int = 0
    wrong: int = 0
    lower: float = 0.0
    upper: float = 1.0
    mode: str = NORMAL
    """``normal``, or the safe mode entered: ``fallback``, ``escalate`` or ``stricter``."""
    shift_p_value: float | None = None
    shift_warning: bool = False
    actor: str = ""
    detail: dict[str, Any] = field(default_factory=dict)
    restarts: int = 0
    """Restarted sequences of this calibrator version so far (0: only the cumulative)."""
    restart_at: dt.datetime | None = None
    """Start of the latest restarted sequence: it holds the answers served after it."""
    restart_accepted: int = 0
    restart_audited: int = 0
    restart_wrong: int = 0
    restart_lower: float = 0.0
    restart_upper: float = 1.0
    created_at: dt.datetime | None = None

    def mode_for(self, calibrator_version: str) -> str:
        """The mode a gateway trusting ``calibrator_version`` serves in."""
        return self.mode if calibrator_version == self.calibrator_version else NORMAL

    def restarts_for(self, calibrator_version: str) -> list[Restart]:
        """The restarted sequences of ``calibrator_version`` (none for another version)."""
        if calibrator_version != self.calibrator_version:
            return []
        recorded = self.detail.get("restarts") if isinstance(self.detail, dict) else None
        parsed = (Restart.from_json(item) for item in recorded or [])
        return [restart for restart in parsed if restart is not None]

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        for name in ("created_at", "restart_at"):
            moment = getattr(self, name)
            data[name] = moment.isoformat() if moment else None
        return data

    def same_as(self, other: LiveState) -> bool:
        """Nothing worth a new row changed (bounds, counts, mode, warning, restarts)."""
        keys = (
            "calibrator_version",
            "accepted",
            "audited",
            "wrong",
            "mode",
            "shift_warning",
            "restarts",
            "restart_accepted",
            "restart_audited",
            "restart_wrong",
        )
        return all(getattr(self, k) == getattr(other, k) for k in keys)


_COLUMNS = tuple(f.name for f in fields(LiveState) if f.name != "created_at")


class StateStore:
    """Reads and appends live states."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.create_schema()  # the migrations create the table

    def append(self, state: LiveState) -> None:
        values = {name: getattr(state, name) for name in _COLUMNS}
        with self.db.session() as session:
            session.add(LiveStateRow(id=uuid.uuid4().hex, created_at=_utcnow(), **values))

    def latest(self, collection: str) -> LiveState | None:
        # One statement built once, the row's columns on a plain connection: the gateway
        # reads this once per decision, and building the statement or an ORM session cost
        # more than running it.
        with self.db.connection() as connection:
            row = connection.execute(_LATEST, {"collection": collection}).first()
            return None if row is None else _state(row)

    def history(self, collection: str, limit: int = 100) -> list[LiveState]:
        """Newest first."""
        statement = (
            select(LiveStateRow)
            .where(LiveStateRow.collection == collection)
            .order_by(LiveStateRow.created_at.desc())
            .limit(limit)
        )
        with self.db.session() as session:
            return [_state(row) for row in session.scalars(statement).all()]


_LATEST = (
    select(*LiveStateRow.__table__.columns)
    .where(LiveStateRow.collection == bindparam("collection"))
    .order_by(LiveStateRow.created_at.desc(), LiveStateRow.id)
    .limit(1)
)
"""A collection's newest state (``collection`` bound at execution)."""


def _state(row: Any) -> LiveState:
    """A state from a :class:`LiveStateRow` or a result row of its columns."""
    values = {name: getattr(row, name) for name in _COLUMNS}
    if row.restart_at is not None:
        values["restart_at"] = as_utc(row.restart_at)
    return LiveState(**values, created_at=row.created_at)
