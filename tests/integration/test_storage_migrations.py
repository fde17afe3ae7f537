"""The store's schema comes from its Alembic migrations, on SQLite and PostgreSQL.

- A database holding the schema Tribunal created before it had migrations (the DDL in
  ``tests/integration/schemas/``, dumped from that version) upgrades in place at the
  next start: rows kept, new columns usable, the audit trail still append-only.
- A new database migrates to a schema identical to the table classes (Alembic's
  comparison finds no difference), and a second start changes nothing.
- A decision and its escalation are written in one transaction: both or neither.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, func, select, text
from tribunal.audit import LiveStateRow  # noqa: F401  (its table joins Base.metadata)
from tribunal.core import UnavailableError
from tribunal.core.storage import Base, Database, DecisionRecord, EscalationRecord, EscalationRow
from tribunal.core.storage._database import normalise_url
from tribunal.core.storage._tables import AuditDecisionRow
from tribunal.core.storage.migrations import head_revision
from tribunal.jobs import JobStore, LabelItem
from tribunal.jobs._review_tables import ReviewVoteRow
from tribunal.jobs._tables import JobItemRow

SCHEMAS = Path(__file__).parent / "schemas"


def _load_old_schema(url: str, dialect: str) -> None:
    """Create the pre-migration schema and one row in every table, as that version did."""
    ddl = (SCHEMAS / f"2026-12-01-{dialect}.sql").read_text()
    engine = create_engine(normalise_url(url))
    now = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    with engine.begin() as connection:
        if dialect == "sqlite":
            connection.connection.executescript(ddl)  # type: ignore[union-attr]
        else:  # no parameters: psycopg sends the script as it is ('%' included)
            connection.connection.cursor().execute(ddl)
            # pg_dump's script empties search_path for its session; restore it.
            connection.exec_driver_sql("SET search_path TO public")
        connection.execute(
            text(
                "INSERT INTO audit_decisions (id, created_at, kind, request_id, query, "
                "collection, decision, reason, failed_stage, error, kb_entry_id, "
                "candidate_ids, signals, versions, latencies_ms, total_ms, detail) VALUES "
                "('old-audit', :now, 'answer', 'r1', 'q?', 'faq', 'ACCEPT', '', '', '', "
                "'e1', '[]', '{}', '{}', '{}', 1.5, '{}')"
            ),
            {"now": now},
        )
        connection.execute(
            text(
                "INSERT INTO escalations (id, created_at, item_id, query, chunk, answers, "
                "reason, history, audit_id, status) VALUES ('old-esc', :now, 'i1', 'q', 'c', "
                "'[]', 'unsure', '{}', 'old-audit', 'open')"
            ),
            {"now": now},
        )
        connection.execute(
            text(
                "INSERT INTO label_jobs (name, mode, settings, source, created_at, status) "
                "VALUES ('old-job', 'judge', '{}', '{}', :now, 'stopped')"
            ),
            {"now": now},
        )
        for position, item_id in enumerate(("a", "b")):
            connection.execute(
                text(
                    "INSERT INTO job_items (job, item_id, position, query_id, doc_id, query, "
                    "chunk, answers, label, source, finished_at) VALUES ('old-job', :id, :pos, "
                    "'', '', 'what is it?', 'a passage', '[]', :label, :source, :finished)"
                ),
                {
                    "id": item_id,
                    "pos": position,
                    "label": 1 if item_id == "a" else None,
                    "source": "JUDGES" if item_id == "a" else None,
                    "finished": now if item_id == "a" else None,
                },
            )
        connection.execute(
            text(
                "INSERT INTO review_votes (id, item_key, annotator, label, is_attention, "
                "created_at) VALUES ('v1', 'old-esc', 'ann', 'relevant', :f, :now)"
            ),
            {"f": False, "now": now},
        )
    engine.dispose()


def _schema_differences(db: Database) -> list[object]:
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection)
        return list(compare_metadata(context, Base.metadata))


def test_the_schema_before_migrations_upgrades_in_place(database_url: str) -> None:
    dialect = "sqlite" if database_url.startswith("sqlite") else "postgresql"
    _load_old_schema(database_url, dialect)
    db = Database(database_url)
    assert db.schema_revision() is None
    db.create_schema()
    assert db.schema_revision() == head_revision()
    assert _schema_differences(db) == []
    # Every row is still there.
    old = db.decision("old-audit")
    assert (old.query, old.decision, old.total_ms) == ("q?", "ACCEPT", 1.5)
    [escalation] = db.escalations()
    assert (escalation.id, escalation.audit_id) == ("old-esc", "old-audit")
    with db.session() as session:
        assert session.scalar(select(func.count()).select_from(ReviewVoteRow)) == 1
    # The job resumes with the new columns: the pending item is leased and labelled.
    store = JobStore(db)
    assert store.counts("old-job").pending == 1
    [claimed] = store.claim("old-job", "runner-1", 10, lease_s=60)
    assert claimed.item_id == "b"
    with db.session() as session:
        row = session.get(JobItemRow, ("old-job", "b"))
        assert row is not None
        assert row.lease_owner == "runner-1"
    # The audit trail is still append-only.
    with pytest.raises(UnavailableError, match="append-only"), db.session() as session:
        session.execute(text("UPDATE audit_decisions SET decision = 'FALLBACK'"))
    db.close()


def test_a_new_database_gets_the_schema_of_the_classes_once(
    tmp_path: Path, database_url: str
) -> None:
    db = Database(database_url)
    db.create_schema()
    assert db.schema_revision() == head_revision()
    assert _schema_differences(db) == []
    audit_id = db.append_decision(DecisionRecord(kind="answer", query="q", decision="ACCEPT"))
    db.close()
    again = Database(database_url)  # a restart: the migrations find nothing to do
    again.create_schema()
    assert again.decision(audit_id).query == "q"
    assert again.schema_revision() == head_revision()
    again.close()


def test_a_decision_and_its_escalation_are_one_transaction(database_url: str) -> None:
    db = Database(database_url)
    db.create_schema()
    audit_id, escalation_id = db.record_decision(
        DecisionRecord(kind="label", query="q", decision="ESCALATED"),
        EscalationRecord(query="q", chunk="c", reason="unsure", item_id="i1"),
    )
    [stored] = db.escalations()
    assert (stored.id, stored.audit_id) == (escalation_id, audit_id)
    # An escalation that cannot be written takes its decision with it.
    unstorable = EscalationRecord(query="q", chunk="c", reason="r" * 65, item_id="x" * 300)
    before = _count(db, AuditDecisionRow), _count(db, EscalationRow)
    if db.dialect == "postgresql":  # VARCHAR widths are enforced
        with pytest.raises(UnavailableError):
            db.record_decision(DecisionRecord(kind="label", query="q2", decision="X"), unstorable)
        assert (_count(db, AuditDecisionRow), _count(db, EscalationRow)) == before
    db.close()


def _count(db: Database, row: type) -> int:
    with db.session() as session:
        return int(session.scalar(select(func.count()).select_from(row)) or 0)


def test_a_failed_escalation_write_leaves_no_decision_on_sqlite(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path}/t.db")
    db.create_schema()
    # SQLite does not enforce widths: make the escalation insert fail another way.
    with db.engine.begin() as connection:
        connection.execute(text("DROP TABLE escalations"))
    with pytest.raises(UnavailableError):
        db.record_decision(
            DecisionRecord(kind="label", query="q", decision="ESCALATED"),
            EscalationRecord(query="q", chunk="c", reason="unsure"),
        )
    assert _count(db, AuditDecisionRow) == 0
    db.close()


def test_label_items_round_trip_after_the_upgrade(database_url: str) -> None:
    store = JobStore(Database(database_url))
    store.create_job("j", mode="judge", settings={}, source={})
    assert store.add_items("j", [LabelItem("i1", "query one", "chunk one")]) == 1
    store.close()


def test_the_dumped_schemas_are_the_old_ones() -> None:
    """The fixtures hold what that version's create_all wrote: no lease columns yet."""
    for dialect in ("sqlite", "postgresql"):
        ddl = (SCHEMAS / f"2026-12-01-{dialect}.sql").read_text()
        assert "job_items" in ddl
        assert "lease_owner" not in ddl
        assert "alembic_version" not in ddl
