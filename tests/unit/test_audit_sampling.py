"""The audit coin, the daily budget, the shift test, and the live bound from an audit store.

SQLite in a temporary folder; decisions, audit items and votes are written the way the
gateway and the review queue write them.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from tribunal.audit import (
    AUDIT_REASON,
    AuditSampler,
    LiveMonitor,
    StateStore,
    audit_traffic,
    live_bound,
    served_accepts,
    shift_test,
)
from tribunal.core.settings import AuditSettings
from tribunal.core.storage import Database, DecisionRecord, EscalationRecord
from tribunal.jobs import ReviewQueue

DAY = dt.datetime(2026, 12, 2, 9, tzinfo=dt.UTC)


def test_the_coin_is_seeded_and_hits_its_share() -> None:
    settings = AuditSettings(accept_share=0.1, fallback_share=0.02, daily_budget=10**6)
    sampler = AuditSampler(settings, clock=lambda: DAY)
    draws = [sampler.draw(f"id-{i}", "ACCEPT", 0.9) for i in range(10_000)]
    assert sum(d.sampled for d in draws) == 1004
    again = AuditSampler(settings, clock=lambda: DAY)
    assert [again.draw(f"id-{i}", "ACCEPT", 0.9).sampled for i in range(50)] == [
        d.sampled for d in draws[:50]
    ]
    fallback = [sampler.draw(f"fb-{i}", "FALLBACK", 0.3) for i in range(10_000)]
    assert {d.inclusion for d in fallback} == {0.02}
    assert sum(d.sampled for d in fallback) == 193
    assert sampler.draw("x", "ESCALATE", 0.5).inclusion == 0.0


def test_strata_set_the_share_by_confidence() -> None:
    settings = AuditSettings(accept_share=0.05, accept_strata={"0.8": 0.3, "0.95": 0.1})
    sampler = AuditSampler(settings, clock=lambda: DAY)
    assert sampler.inclusion("ACCEPT", 0.7) == (0.3, "accept<0.8")
    assert sampler.inclusion("ACCEPT", 0.9) == (0.1, "accept<0.95")
    assert sampler.inclusion("ACCEPT", 0.99) == (0.05, "accept")
    assert settings.min_accept_share() == 0.05
    assert sampler.draw("k", "ACCEPT", 0.7).min_inclusion == 0.05


def test_the_budget_is_checked_before_the_coin_and_renews_each_day() -> None:
    now = [DAY]
    sampler = AuditSampler(
        AuditSettings(accept_share=1.0, daily_budget=3),
        queued_today=lambda start: 1 if start.date() == DAY.date() else 0,
        clock=lambda: now[0],
    )
    draws = [sampler.draw(f"k{i}", "ACCEPT", 0.9) for i in range(4)]
    assert [(d.inclusion, d.sampled) for d in draws] == [
        (1.0, True), (1.0, True), (0.0, False), (0.0, False)
    ]  # fmt: skip
    assert draws[2].stratum == "accept:budget_spent"
    now[0] = DAY + dt.timedelta(days=1)
    assert sampler.draw("k9", "ACCEPT", 0.9).sampled


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"accept_strata": {"x": 0.1}}, "not a number"),
        ({"accept_strata": {"0.5": 0.0}}, "shares in"),
        ({"safe_mode": "stricter"}, "safe_alpha"),
    ],
)
def test_bad_audit_settings_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AuditSettings(**kwargs)  # type: ignore[arg-type]


def test_the_shift_test_sees_a_changed_distribution_not_noise() -> None:
    rng = np.random.default_rng(3)
    reference = {
        "confidence": rng.beta(5, 2, 300).tolist(),
        "top1_similarity": rng.beta(8, 3, 300).tolist(),
    }
    same = {
        "confidence": rng.beta(5, 2, 300).tolist(),
        "top1_similarity": rng.beta(8, 3, 300).tolist(),
    }
    shifted = {
        "confidence": rng.beta(5, 2, 300).tolist(),
        "top1_similarity": rng.beta(5, 4, 300).tolist(),
    }
    assert not shift_test(reference, same).warning
    result = shift_test(reference, shifted)
    assert result.warning
    assert result.p_values["top1_similarity"] < 1e-6 < result.p_values["confidence"]
    assert shift_test(reference, {"confidence": [0.5] * 5}).p_value is None  # too few


def _serve(
    db: Database, queue: ReviewQueue, n: int, wrong: set[int], *, p: float, start: int = 0
) -> None:
    """n ACCEPTs under calibrator v1, every one audited at inclusion p and reviewed."""
    for i in range(start, start + n):
        sampled = True
        audit_id = f"{i:032d}"
        item = EscalationRecord(
            query=f"q{i}",
            chunk="Q: ?\nA: !",
            reason=AUDIT_REASON,
            item_id=audit_id,
            history={
                "decision": "ACCEPT",
                "kb_entry_id": f"e{i % 3}",
                "collection": "faq",
                "calibrator": "v1",
                "p": p,
            },
        )
        _, escalation = db.record_decision(
            DecisionRecord(
                id=audit_id,
                kind="answer",
                query=f"q{i}",
                decision="ACCEPT",
                collection="faq",
                confidence=0.9,
                versions={"confidence": {"calibrator": "v1"}},
                detail={"audit": {"p": p, "sampled": sampled, "stratum": "accept", "min_p": p}},
            ),
            item,
        )
        queue.vote("ann", escalation, "irrelevant" if i in wrong else "relevant")


def test_the_monitor_trips_on_reviews_and_a_new_version_starts_afresh(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    settings = AuditSettings(accept_share=0.5, delta=0.1)
    queue = ReviewQueue(db, votes_per_item=1)
    _serve(db, queue, 30, wrong=set(range(0, 30, 2)), p=0.5)  # half of them wrong
    bounds = live_bound(db, settings, collection="faq", calibrator_version="v1")
    bound, pending = bounds.cumulative, bounds.pending
    assert bounds.restarted == ()
    assert (bound.accepted, bound.audited, bound.wrong, pending) == (30, 30, 15, 0)
    assert bound.estimate == pytest.approx(1.0)  # 15 wrong, each weighted 1/0.5, over 30
    monitor = LiveMonitor(db, settings)
    state, shift = monitor.refresh(collection="faq", calibrator_version="v1", alpha=0.1)
    assert shift is None
    assert state.mode == "fallback"
    assert state.lower > 0.1
    assert "entered" in state.detail
    # Recorded once; the same state again adds no row.
    monitor.refresh(collection="faq", calibrator_version="v1", alpha=0.1)
    assert len(StateStore(db).history("faq")) == 1
    latest = StateStore(db).latest("faq")
    assert latest is not None
    assert latest.mode_for("v1") == "fallback"
    assert latest.mode_for("v2") == "normal"
    # Another calibrator version has no audits yet: normal.
    fresh, _ = monitor.refresh(collection="faq", calibrator_version="v2", alpha=0.1)
    assert (fresh.accepted, fresh.mode) == (0, "normal")


def test_audit_traffic_keeps_every_label_weighted_or_thins_it(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    queue = ReviewQueue(db, votes_per_item=1)
    _serve(db, queue, 40, wrong={1, 2, 3}, p=0.5)
    rows, counts = audit_traffic(db, collection="faq", seed=0)
    assert (counts["reviewed"], counts["kept"], counts["weighting"]) == (40, 40, "uniform")
    # One share for every decision: a uniform sample, no weights; each row its own group.
    assert rows[1] == {"query": "q1", "answers": [], "audit_id": f"{1:032d}", "group": f"{1:032d}"}
    assert rows[0]["answers"] == ["e0"]
    # Audited at 0.1 too: every label kept, weighted by pi_floor / pi.
    _serve(db, queue, 20, wrong=set(), p=0.1, start=40)
    rows, counts = audit_traffic(db, collection="faq", seed=0)
    assert (counts["reviewed"], counts["kept"], counts["weighting"]) == (60, 60, "ipw")
    assert {row["weight"] for row in rows if int(row["audit_id"]) < 40} == {0.2}
    assert {row["weight"] for row in rows if int(row["audit_id"]) >= 40} == {1.0}
    # Thinning: the 0.5 items kept with probability 0.2 (a uniform sample), no weights.
    rows, counts = audit_traffic(db, collection="faq", seed=0, weighting="thin")
    kept = {int(row["audit_id"]) for row in rows}
    assert set(range(40, 60)) <= kept
    assert (counts["reviewed"], len(kept & set(range(40)))) == (60, 8)
    assert all("weight" not in row for row in rows)
    with pytest.raises(Exception, match="no reviewed audit items"):
        audit_traffic(db, collection="other")
    with pytest.raises(Exception, match="weighting 'mean'"):
        audit_traffic(db, collection="faq", weighting="mean")  # type: ignore[arg-type]


def test_served_accepts_read_the_served_confidence_and_verdict_of_each_audited_accept(
    tmp_path: Path,
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    queue = ReviewQueue(db, votes_per_item=1)
    _serve(db, queue, 10, wrong={1, 2}, p=0.5)
    sample = served_accepts(db, collection="faq", calibrator_version="v1")
    assert sample.confidence.tolist() == [0.9] * 10
    assert np.flatnonzero(~sample.correct).tolist() == [1, 2]
    assert sample.weight is None  # one ACCEPT share: a uniform sample
    # A confidence stratum audited at 0.1: weights against the smallest ACCEPT share.
    _serve(db, queue, 5, wrong=set(), p=0.1, start=10)
    sample = served_accepts(db, collection="faq", calibrator_version="v1")
    assert sample.weight is not None
    assert sample.weight.tolist() == pytest.approx([0.2] * 10 + [1.0] * 5)
    with pytest.raises(Exception, match="no reviewed audited ACCEPTs of calibrator 'v2'"):
        served_accepts(db, collection="faq", calibrator_version="v2")
    # The sample for a served threshold: ACCEPTs below it (a request's larger alpha) are
    # left out, as are decisions served in a safe mode.
    with pytest.raises(Exception, match="no reviewed audited ACCEPTs"):
        served_accepts(db, collection="faq", calibrator_version="v1", served=0.95)
    _decide(db, "a" * 32, decision="FALLBACK", threshold=0.95, safe_mode="stricter")
    assert (
        served_accepts(db, collection="faq", calibrator_version="v1", served=0.9).confidence.size
        == 15
    )
    # A decision at a threshold above the served one (a request's smaller alpha): refused.
    _decide(db, "b" * 32, decision="FALLBACK", threshold=0.95)
    with pytest.raises(Exception, match=r"1 decisions of calibrator 'v1' .* above 0\.9"):
        served_accepts(db, collection="faq", calibrator_version="v1", served=0.9)


def _decide(db: Database, audit_id: str, *, decision: str, threshold: float, **detail: str) -> None:
    db.record_decision(
        DecisionRecord(
            id=audit_id,
            kind="answer",
            query="q",
            decision=decision,
            collection="faq",
            confidence=0.92,
            threshold=threshold,
            versions={"confidence": {"calibrator": "v1"}},
            detail={"audit": {"p": 0.1, "sampled": False, "stratum": "fallback"}, **detail},
        ),
        None,
    )


def test_a_fallback_is_labelled_with_the_entry_its_reviewers_picked(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'a.db'}")
    queue = ReviewQueue(db, votes_per_item=3)
    picks = {
        0: [("relevant", "e7"), ("relevant", "e7"), ("irrelevant", None)],  # e7 by majority
        1: [("relevant", "e7"), ("relevant", "e8"), ("irrelevant", None)],  # no majority
        2: [("irrelevant", None)] * 3,  # none answers
        3: [("relevant", None)] * 3,  # before the page asked which: the entry shown
    }
    for i, votes in picks.items():
        audit_id = f"{i:032d}"
        _, escalation = db.record_decision(
            DecisionRecord(
                id=audit_id,
                kind="answer",
                query=f"q{i}",
                decision="FALLBACK",
                collection="faq",
                confidence=0.3,
                versions={"confidence": {"calibrator": "v1"}},
                detail={"audit": {"p": 0.1, "sampled": True, "stratum": "fallback", "min_p": 0.1}},
            ),
            EscalationRecord(
                query=f"q{i}",
                chunk="Q: ?\nA: !",
                reason=AUDIT_REASON,
                item_id=audit_id,
                history={
                    "decision": "FALLBACK",
                    "kb_entry_id": "e1",
                    "collection": "faq",
                    "p": 0.1,
                },
            ),
        )
        for n, (label, entry) in enumerate(votes):
            queue.vote(f"ann{n}", escalation, label, entry_id=entry)
    rows, _ = audit_traffic(db, collection="faq", votes_per_item=3)
    assert [row["answers"] for row in rows] == [["e7"], [], [], ["e1"]]
    with pytest.raises(Exception, match="goes with the label relevant"):
        queue.vote("ann9", escalation, "irrelevant", entry_id="e1")
