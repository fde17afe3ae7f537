"""A restarted live bound through the real audit store (SQLite and PostgreSQL): the shift
warning starts a fresh sequence, which is persisted with the state, holds only answers
served after it, and trips the fail-safe that the diluted cumulative bound does not."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from prometheus_client import REGISTRY
from tribunal.audit import (
    AUDIT_REASON,
    NORMAL,
    LiveMonitor,
    LiveState,
    Restart,
    ShiftResult,
    StateStore,
)
from tribunal.core.settings import AuditSettings
from tribunal.core.storage import Database, DecisionRecord, EscalationRecord
from tribunal.gateway._live_audit import LiveAudit
from tribunal.jobs import ReviewQueue

VERSION = "cal-v1"
ALPHA = 0.2
_IDS = itertools.count()


def _serve(
    db: Database, queue: ReviewQueue, confidence: float, similarity: float, *, wrong: bool
) -> None:
    """One accepted answer, audited with probability 1 and reviewed at once."""
    audit_id = f"{next(_IDS):032d}"
    item = EscalationRecord(
        query=f"q{audit_id}",
        chunk="Q: a\nA: b",
        reason=AUDIT_REASON,
        item_id=audit_id,
        history={
            "collection": "faq",
            "calibrator": VERSION,
            "p": 1.0,
            "decision": "ACCEPT",
            "kb_entry_id": "e1",
        },
    )
    _, escalation = db.record_decision(
        DecisionRecord(
            id=audit_id,
            kind="answer",
            query=f"q{audit_id}",
            decision="ACCEPT",
            collection="faq",
            confidence=confidence,
            signals={"top": {"signals": {"dense_score": similarity}}},
            versions={"confidence": {"calibrator": VERSION}},
            detail={"audit": {"p": 1.0, "sampled": True, "min_p": 1.0}},
        ),
        item,
    )
    queue.vote("ann", escalation, "irrelevant" if wrong else "relevant")


def test_the_shift_warning_restarts_a_bound_that_trips_when_the_cumulative_one_cannot(
    database_url: str,
) -> None:
    db = Database(database_url)
    queue = ReviewQueue(db, votes_per_item=1)
    settings = AuditSettings(accept_share=1.0, shift_window=100, delta=0.05)
    monitor = LiveMonitor(db, settings)
    grid = np.linspace(0.0, 1.0, 200)
    reference = {"confidence": list(0.7 + 0.3 * grid), "top1_similarity": list(0.6 + 0.3 * grid)}

    def refresh() -> tuple[LiveState, ShiftResult | None]:
        return monitor.refresh(
            collection="faq", calibrator_version=VERSION, alpha=ALPHA, reference=reference
        )

    # 200 answers like the calibration traffic, 5% wrong: no warning, no restart.
    for i in range(200):
        u = (i * 37 % 200) / 200
        _serve(db, queue, 0.7 + 0.3 * u, 0.6 + 0.3 * u, wrong=i % 20 == 0)
    state, shift = refresh()
    assert shift is not None
    assert not shift.warning
    assert (state.restarts, state.mode) == (0, NORMAL)
    # The traffic shifts (confident-looking answers to queries that look out of scope):
    # the next refresh warns and starts a fresh sequence from that moment.
    for i in range(100):
        _serve(db, queue, 0.7 + 0.05 * (i % 10) / 10, 0.3 + 0.01 * (i % 10), wrong=i % 10 == 0)
    state, shift = refresh()
    assert shift is not None
    assert shift.warning
    assert (state.restarts, state.restart_audited, state.mode) == (1, 0, NORMAL)
    [restart] = StateStore(db).latest("faq").restarts_for(VERSION)  # type: ignore[union-attr]
    assert (restart.index, restart.reason) == (1, "shift")
    assert restart.at == state.restart_at
    # 40 more shifted answers, 32 wrong. The cumulative bound (340 answers, 52 wrong:
    # 0.15, diluted by the 300 before) stays below alpha; the restarted one, on the 40
    # answers served after its start only, shows the violation and trips the fail-safe.
    for i in range(40):
        _serve(db, queue, 0.72, 0.35, wrong=i % 5 < 4)
    state, _ = refresh()
    assert (state.accepted, state.wrong) == (340, 52)
    assert (state.restarts, state.restart_accepted, state.restart_wrong) == (1, 40, 32)
    assert state.lower < ALPHA < state.restart_lower
    assert state.mode == "fallback"
    assert "restarted bound #1 (shift" in state.detail["entered"]["why"]
    # Read back as written (a restart holds across processes), and exported as gauges.
    stored = StateStore(Database(database_url)).latest("faq")
    assert stored is not None
    assert (stored.restarts, stored.restart_audited, stored.restart_lower) == (
        1,
        40,
        state.restart_lower,
    )
    assert stored.restarts_for("cal-v2") == []  # a new calibrator starts with none
    assert LiveAudit(settings, db).mode("faq", VERSION) == "fallback"
    samples = {
        name: REGISTRY.get_sample_value(f"tribunal_audit_{name}", {"collection": "faq"})
        for name in ("restarts", "restart_rate_lower", "restart_audited")
    }
    assert samples == {
        "restarts": 1.0,
        "restart_rate_lower": pytest.approx(state.restart_lower),
        "restart_audited": 40.0,
    }
    db.close()


def test_a_recorded_restart_reads_back_or_is_ignored() -> None:
    import datetime as dt

    start = Restart(2, dt.datetime(2026, 12, 2, 5, tzinfo=dt.UTC), "schedule")
    assert Restart.from_json(start.to_json()) == start
    assert Restart.from_json({"index": 1}) is None
    assert Restart.from_json("not a restart") is None
