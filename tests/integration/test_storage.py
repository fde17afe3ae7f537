"""The audit store on SQLite and on a real PostgreSQL: round trip, append-only, idempotence."""

from __future__ import annotations

import datetime as dt

import pytest
from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from tribunal.core import ConfigError, NotFoundError, UnavailableError
from tribunal.core.storage import Database, DecisionRecord, EscalationRecord


def _record(**overrides: object) -> DecisionRecord:
    values: dict[str, object] = {
        "kind": "answer",
        "query": "how long is the incubation period?",
        "decision": "ACCEPT",
        "request_id": "r-1",
        "collection": "faq",
        "confidence": 0.93,
        "threshold": 0.71,
        "kb_entry_id": "faq-1",
        "candidate_ids": ("faq-1", "faq-2"),
        "signals": {"faq-1": {"signals": {"ensemble_p_match": 0.9}, "confidence": 0.93}},
        "versions": {"confidence": {"calibrator": "platt-1"}},
        "latencies_ms": {"retrieval": 3.5, "ensemble": 812.0},
        "total_ms": 830.0,
    }
    values.update(overrides)
    return DecisionRecord(**values)  # type: ignore[arg-type]


def test_decision_round_trip_and_filters(database_url: str) -> None:
    db = Database(database_url)
    first = db.append_decision(_record())
    second = db.append_decision(
        _record(
            decision="FALLBACK", reason="STAGE_TIMEOUT", failed_stage="ensemble", confidence=None
        )
    )
    stored = db.decision(first)
    assert stored.id == first
    assert stored.kb_entry_id == "faq-1"
    assert stored.candidate_ids == ("faq-1", "faq-2")
    assert stored.signals["faq-1"]["confidence"] == 0.93
    assert stored.latencies_ms == {"retrieval": 3.5, "ensemble": 812.0}
    assert stored.created_at is not None
    assert [r.id for r in db.decisions(decision="FALLBACK")] == [second]
    assert {r.id for r in db.decisions(kind="answer")} == {first, second}
    assert db.decisions(kind="label") == []
    future = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    assert db.decisions(since=future) == []
    assert db.decision_counts() == {"answer": {"ACCEPT": 1, "FALLBACK/STAGE_TIMEOUT": 1}}
    with pytest.raises(NotFoundError):
        db.decision("missing")
    db.close()


def test_audit_rows_cannot_be_changed_or_deleted(database_url: str) -> None:
    db = Database(database_url)
    audit_id = db.append_decision(_record())
    for statement in (
        "UPDATE audit_decisions SET decision = 'FALLBACK'",
        "DELETE FROM audit_decisions",
    ):
        with (
            pytest.raises(SQLAlchemyError, match="append-only"),
            db.engine.begin() as connection,
        ):
            connection.execute(text(statement))
    assert db.decision(audit_id).decision == "ACCEPT"
    # A second Database on the same URL (a restart) re-creates nothing and keeps the rows.
    again = Database(database_url)
    assert again.decision(audit_id).decision == "ACCEPT"
    db.close()
    again.close()


def test_escalations_are_keyed_by_content(database_url: str) -> None:
    db = Database(database_url)
    item = EscalationRecord(
        query="q", chunk="passage", answers=("a",), reason="escalated", item_id="i-1"
    )
    first = db.add_escalation(item)
    assert db.add_escalation(item) == first  # a retried request adds no duplicate
    other = db.add_escalation(EscalationRecord(query="q", chunk="other", reason="escalated"))
    queued = db.escalations()
    assert [e.id for e in queued] == [first, other]
    assert queued[0].answers == ("a",)
    assert queued[0].status == "open"
    db.close()


def test_a_decision_and_its_escalation_are_written_together_or_not_at_all(
    database_url: str,
) -> None:
    db = Database(database_url)
    item = EscalationRecord(query="q", chunk="passage", reason="audit", item_id="i-2")
    audit_id, escalation_id = db.record_decision(_record(), item)
    (queued,) = db.escalations()
    assert (queued.id, queued.audit_id) == (escalation_id, audit_id)
    assert db.decision(audit_id).created_at is not None  # the column default, applied
    # The same decision id again fails as a whole: no second escalation is queued.
    again = EscalationRecord(query="q", chunk="other passage", reason="audit")
    with pytest.raises(UnavailableError, match="failed"):
        db.record_decision(_record(id=audit_id), again)
    assert [e.id for e in db.escalations()] == [escalation_id]
    with pytest.raises(UnavailableError, match="failed"), db.connection() as connection:
        connection.execute(text("SELECT * FROM no_such_table"))
    db.close()


def test_bad_urls_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="not a SQLAlchemy URL"):
        Database("not a url")
    with pytest.raises(ConfigError, match="sqlite and postgresql"):
        Database("mysql://127.0.0.1/x")
