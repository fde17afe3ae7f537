"""The store: SQLite by default, PostgreSQL via ``TRIBUNAL_DATABASE_URL``.

Audit decisions are append-only, enforced by the database itself (a trigger
refuses UPDATE and DELETE), so no code path — ours or an operator's psql
session — can rewrite history. Escalations are keyed by content, so a retried
request inserts nothing twice; a decision and its escalation are written in one
transaction (both or neither). The schema is created and upgraded by the Alembic
migrations in :mod:`.migrations`, at the first use of a :class:`Database`.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from filelock import FileLock
from sqlalchemy import Connection, Engine, create_engine, event, func, insert, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from .._errors import ConfigError, NotFoundError, UnavailableError
from . import migrations
from ._tables import AuditDecisionRow, EscalationRow

__all__ = ["Database", "DecisionRecord", "EscalationRecord", "normalise_url"]

# Serialises schema upgrades of one PostgreSQL database across processes.
_MIGRATION_LOCK_KEY = 712001
_INSERT_DECISION = insert(AuditDecisionRow)
"""A decision row (its values given at execution; ``created_at`` by the column default)."""


@dataclass(frozen=True)
class DecisionRecord:
    """One audited decision, as written and as read back."""

    kind: str
    """``answer`` (online matching) or ``label`` (relevance labelling)."""
    query: str
    decision: str
    """``ACCEPT`` / ``FALLBACK`` / ``ESCALATE`` for answers; the label for labels."""
    request_id: str = ""
    collection: str = ""
    reason: str = ""
    """Why a fallback happened (``LOW_CONFIDENCE``, ``STAGE_TIMEOUT``, ...)."""
    failed_stage: str = ""
    error: str = ""
    confidence: float | None = None
    threshold: float | None = None
    kb_entry_id: str = ""
    candidate_ids: Sequence[str] = ()
    signals: dict[str, Any] = field(default_factory=dict)
    """Per candidate id: the signals the confidence service saw."""
    versions: dict[str, Any] = field(default_factory=dict)
    """Model, prompt and artifact versions (provenance)."""
    latencies_ms: dict[str, float] = field(default_factory=dict)
    total_ms: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    created_at: dt.datetime | None = None

    def to_json(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["candidate_ids"] = list(self.candidate_ids)
        data["created_at"] = self.created_at.isoformat() if self.created_at else None
        return data


# The record fields stored as same-named columns (id and created_at are set on write).
_DECISION_COLUMNS: tuple[str, ...] = tuple(
    f.name for f in fields(DecisionRecord) if f.name not in ("id", "created_at")
)


@dataclass(frozen=True)
class EscalationRecord:
    """An item waiting for human review."""

    query: str
    chunk: str
    reason: str
    answers: Sequence[str] = ()
    item_id: str = ""
    history: dict[str, Any] = field(default_factory=dict)
    audit_id: str = ""
    status: str = "open"
    id: str = ""
    created_at: dt.datetime | None = None

    def key(self) -> str:
        """Content key: the same item escalated twice is one row."""
        payload = json.dumps([self.item_id, self.query, self.chunk, list(self.answers)])
        return hashlib.sha256(payload.encode()).hexdigest()[:32]


def normalise_url(url: str) -> str:
    """Pick the installed PostgreSQL driver (psycopg 3) for plain ``postgresql://`` URLs."""
    try:
        parsed = make_url(url)
    except ArgumentError as exc:
        raise ConfigError(f"database_url {url!r} is not a SQLAlchemy URL: {exc}") from exc
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed.render_as_string(hide_password=False)


class Database:
    """Tables created on first use; one instance per process, safe across threads."""

    def __init__(self, url: str) -> None:
        self.url = normalise_url(url)
        self.dialect = make_url(self.url).get_backend_name()
        if self.dialect not in ("sqlite", "postgresql"):
            raise ConfigError(
                f"database_url uses {self.dialect!r}; Tribunal supports sqlite and postgresql",
                field="database_url",
            )
        self.engine: Engine = self._create_engine()
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._schema_lock = threading.Lock()
        self._schema_ready = False

    def _create_engine(self) -> Engine:
        if self.dialect == "sqlite":
            database = make_url(self.url).database
            if database and database != ":memory:":
                Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
            engine = create_engine(self.url, connect_args={"timeout": 30})

            @event.listens_for(engine, "connect")
            def _pragmas(connection: Any, _record: Any) -> None:
                # WAL: readers (``tribunal audit``) never block the gateway's writes.
                cursor = connection.cursor()
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA busy_timeout=30000")
                cursor.close()

            return engine
        return create_engine(self.url, pool_pre_ping=True)

    def create_schema(self) -> None:
        """Create the schema, or upgrade it to the current revision (idempotent; safe when
        several processes start at once)."""
        with self._schema_lock:
            if self._schema_ready:
                return
            try:
                with self._migration_lock(), self.engine.begin() as connection:
                    if self.dialect == "postgresql":
                        connection.execute(
                            text(f"SELECT pg_advisory_xact_lock({_MIGRATION_LOCK_KEY})")
                        )
                    migrations.upgrade(connection)
            except SQLAlchemyError as exc:
                raise UnavailableError(
                    f"cannot prepare the database {self._safe_url()}: {exc}"
                ) from exc
            self._schema_ready = True

    def schema_revision(self) -> str | None:
        """The migration revision the database is at (None: never migrated)."""
        with self.engine.connect() as connection:
            return migrations.current_revision(connection)

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """SQLite has no advisory lock: processes upgrading one file take a lock file."""
        database = make_url(self.url).database
        if self.dialect != "sqlite" or not database or database == ":memory:":
            yield
            return
        with FileLock(str(Path(database).expanduser()) + ".migrate.lock", timeout=120):
            yield

    def _safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction; database errors become :class:`UnavailableError`."""
        self.create_schema()
        with self._unavailable_on_error(), self._sessions.begin() as session:
            yield session

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A transaction on a plain connection, no ORM session; database errors become
        :class:`UnavailableError`. For the few statements run once per request, built
        once: building a statement and a session's bookkeeping cost more than running it
        (the serving mode's read on SQLite: 0.22 ms of CPU built per call in a session,
        0.04 ms built once here; ``bench/audit_store.py``)."""
        self.create_schema()
        with self._unavailable_on_error(), self.engine.begin() as connection:
            yield connection

    @contextmanager
    def _unavailable_on_error(self) -> Iterator[None]:
        try:
            yield
        except SQLAlchemyError as exc:
            raise UnavailableError(f"database {self._safe_url()} failed: {exc}") from exc

    # -- audit ---------------------------------------------------------------------------

    def append_decision(self, record: DecisionRecord) -> str:
        """Write one decision; returns its id."""
        audit_id, _ = self.record_decision(record)
        return audit_id

    def record_decision(
        self, record: DecisionRecord, escalation: EscalationRecord | None = None
    ) -> tuple[str, str]:
        """Write a decision and, when given, its escalation (linked to the decision's id)
        in one transaction: both are stored or neither. Returns (audit id, escalation id,
        "" without one)."""
        audit_id = record.id or uuid.uuid4().hex
        values = {name: getattr(record, name) for name in _DECISION_COLUMNS}
        values["candidate_ids"] = list(record.candidate_ids)
        linked = None
        if escalation is not None:
            linked = escalation if escalation.audit_id else _with_audit(escalation, audit_id)

        # One INSERT built once, on a plain connection, not the ORM's unit of work in a
        # session: one is written per decision, on the gateway's hot path.
        with self.connection() as connection:
            connection.execute(_INSERT_DECISION, {"id": audit_id, **values})
            escalation_id = self._insert_escalation(connection, linked) if linked else ""
        return audit_id, escalation_id

    def decision(self, audit_id: str) -> DecisionRecord:
        with self.session() as session:
            row = session.get(AuditDecisionRow, audit_id)
            if row is None:
                raise NotFoundError(f"no audit decision with id {audit_id!r}")
            return _decision_record(row)

    def decisions(
        self,
        *,
        kind: str | None = None,
        decision: str | None = None,
        since: dt.datetime | None = None,
        query_contains: str | None = None,
        limit: int = 50,
    ) -> list[DecisionRecord]:
        """Newest first."""
        statement = select(AuditDecisionRow).order_by(AuditDecisionRow.created_at.desc())
        if kind:
            statement = statement.where(AuditDecisionRow.kind == kind)
        if decision:
            statement = statement.where(AuditDecisionRow.decision == decision)
        if since is not None:
            statement = statement.where(AuditDecisionRow.created_at >= since)
        if query_contains:
            statement = statement.where(AuditDecisionRow.query.contains(query_contains))
        with self.session() as session:
            rows = session.scalars(statement.limit(limit)).all()
            return [_decision_record(row) for row in rows]

    def decision_counts(
        self, *, since: dt.datetime | None = None, collection: str | None = None
    ) -> dict[str, dict[str, int]]:
        """``{kind: {decision or decision/reason: count}}``, optionally of one collection."""
        statement = select(
            AuditDecisionRow.kind,
            AuditDecisionRow.decision,
            AuditDecisionRow.reason,
            func.count(),
        ).group_by(AuditDecisionRow.kind, AuditDecisionRow.decision, AuditDecisionRow.reason)
        if since is not None:
            statement = statement.where(AuditDecisionRow.created_at >= since)
        if collection is not None:
            statement = statement.where(AuditDecisionRow.collection == collection)
        counts: dict[str, dict[str, int]] = {}
        with self.session() as session:
            for kind, decision, reason, count in session.execute(statement):
                name = f"{decision}/{reason}" if reason else decision
                counts.setdefault(kind, {})[name] = int(count)
        return counts

    # -- escalations ---------------------------------------------------------------------

    def add_escalation(self, record: EscalationRecord) -> str:
        """Insert unless the same item is already queued; returns the escalation id."""
        with self.session() as session:
            return self._insert_escalation(session, record)

    def _insert_escalation(self, session: Session | Connection, record: EscalationRecord) -> str:
        key = record.key()
        values = {
            "id": key,
            "created_at": dt.datetime.now(dt.UTC),
            "item_id": record.item_id,
            "query": record.query,
            "chunk": record.chunk,
            "answers": list(record.answers),
            "reason": record.reason,
            "history": record.history,
            "audit_id": record.audit_id,
            "status": record.status,
        }
        upsert = postgresql.insert if self.dialect == "postgresql" else sqlite.insert
        statement = upsert(EscalationRow).values(**values).on_conflict_do_nothing()
        session.execute(statement)
        return key

    def escalations(
        self, *, status: str | None = "open", limit: int = 100
    ) -> list[EscalationRecord]:
        statement = select(EscalationRow).order_by(EscalationRow.created_at)
        if status:
            statement = statement.where(EscalationRow.status == status)
        with self.session() as session:
            rows = session.scalars(statement.limit(limit)).all()
            return [
                EscalationRecord(
                    query=row.query,
                    chunk=row.chunk,
                    reason=row.reason,
                    answers=tuple(row.answers),
                    item_id=row.item_id,
                    history=row.history,
                    audit_id=row.audit_id,
                    status=row.status,
                    id=row.id,
                    created_at=row.created_at,
                )
                for row in rows
            ]

    def close(self) -> None:
        self.engine.dispose()


def _with_audit(record: EscalationRecord, audit_id: str) -> EscalationRecord:
    return replace(record, audit_id=audit_id)


def _decision_record(row: AuditDecisionRow) -> DecisionRecord:
    values = {name: getattr(row, name) for name in _DECISION_COLUMNS}
    values["candidate_ids"] = tuple(row.candidate_ids)
    return DecisionRecord(**values, id=row.id, created_at=row.created_at)
