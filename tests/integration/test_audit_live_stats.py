"""`tribunal audit stats`: the live audit section — bound, mode, shift test — from the
reviews in the audit store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.audit import AUDIT_REASON
from tribunal.cli import main
from tribunal.confidence import CalibratorArtifact
from tribunal.core.storage import Database, DecisionRecord, EscalationRecord
from tribunal.jobs import ReviewQueue

from tests.integration.test_audit_drift import _artifact


def test_stats_report_the_live_bound_and_the_safe_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact_path = _artifact(tmp_path)
    version = CalibratorArtifact.load(artifact_path).version
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    db = Database(url)
    queue = ReviewQueue(db, votes_per_item=1)
    for i in range(20):
        audit_id = f"{i:032d}"
        sampled = i % 2 == 0
        item = (
            EscalationRecord(
                query=f"q{i}",
                chunk="Q: a\nA: b",
                reason=AUDIT_REASON,
                item_id=audit_id,
                history={
                    "collection": "faq",
                    "calibrator": version,
                    "p": 0.5,
                    "decision": "ACCEPT",
                    "kb_entry_id": "e1",
                },
            )
            if sampled
            else None
        )
        _, escalation = db.record_decision(
            DecisionRecord(
                id=audit_id,
                kind="answer",
                query=f"q{i}",
                decision="ACCEPT",
                collection="faq",
                confidence=0.8,
                versions={"confidence": {"calibrator": version}},
                detail={"audit": {"p": 0.5, "sampled": sampled, "min_p": 0.5}},
            ),
            item,
        )
        if sampled and i < 18:  # the last audited answer is still waiting for its review
            queue.vote("ann", escalation, "irrelevant")
    code = main(
        [
            "audit",
            "--database-url",
            url,
            "stats",
            "--artifact",
            str(artifact_path),
            "--alpha",
            "0.1",
        ]
    )
    assert code == 0
    live = json.loads(capsys.readouterr().out)["live_audit"]
    # The stream stops before answer 18 (audited, not yet reviewed): 18 answers, 9 audited.
    assert (live["accepted"], live["audited"], live["wrong"], live["pending_reviews"]) == (
        18, 9, 9, 1
    )  # fmt: skip
    assert live["estimate"] == pytest.approx(1.0)
    assert live["lower"] > 0.1
    assert live["mode"] == "fallback"
    assert "tribunal calibrate --collection faq --from-audit" in live["note"]
    assert live["shift"] is None  # this artifact keeps no reference sample
    # No shift test, no schedule: no restarted bound, and the stored state says so.
    assert (live["restarts"], live["restarted"], live["restart_at"]) == (0, None, None)


def test_calibrate_takes_one_source_of_traffic(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    assert main(["calibrate", "--collection", "faq", "--database-url", url]) != 0
    assert "exactly one of --traffic FILE and --from-audit" in capsys.readouterr().err
    # Nothing reviewed yet: the message says what the audits need.
    code = main(["calibrate", "--collection", "faq", "--from-audit", "--database-url", url])
    assert code != 0
    assert "no reviewed audit items for collection 'faq'" in capsys.readouterr().err
