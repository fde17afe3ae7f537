"""`tribunal audit stats`: the live acceptance rate against the certified coverage."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.confidence import CalibrationBinding, FitConfig, fit_artifact
from tribunal.confidence._threshold import RiskThreshold
from tribunal.core.storage import Database, DecisionRecord

from tests.unit._confidence_data import synthetic_data

BINDING = CalibrationBinding(
    collection="faq",
    collection_version="kb-0123456789abcdef",
    entries=10,
    matcher="features:mf-a",
    embedder="all-minilm-l6-v2@53aa51172d14",
    profile="tiny",
    candidates=2,
)


def _artifact(tmp_path: Path) -> Path:
    fitted = fit_artifact(synthetic_data(300), FitConfig(alphas=(0.1,)))
    # Certified on 100 calibration queries, 40 accepted: coverage 0.4.
    threshold = RiskThreshold(0.1, 0.1, 0.7, 40, 1, 0.095, 100, "ltt")
    return replace(fitted, thresholds=(threshold,), binding=BINDING).save(tmp_path / "c.json")


def _fill(url: str, accepted: int, total: int, collection: str = "faq") -> None:
    db = Database(url)
    db.create_schema()
    for i in range(total):
        db.append_decision(
            DecisionRecord(
                kind="answer",
                query=f"q{i}",
                decision="ACCEPT" if i < accepted else "FALLBACK",
                request_id=f"{collection}-{i}",
                collection=collection,
                reason="" if i < accepted else "LOW_CONFIDENCE",
            )
        )
    db.close()


def _stats(url: str, artifact: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    code = main(
        ["audit", "--database-url", url, "stats", "--artifact", str(artifact), "--alpha", "0.1"]
    )
    assert code == 0
    return json.loads(capsys.readouterr().out)["acceptance_vs_certified"]


def test_acceptance_near_the_certified_coverage_is_no_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    _fill(url, accepted=38, total=100)
    _fill(url, accepted=0, total=50, collection="other")  # another KB: not counted
    drift = _stats(url, _artifact(tmp_path), capsys)
    assert drift["certified_coverage"] == 0.4
    assert (drift["answers"], drift["accepted"]) == (100, 38)
    assert drift["acceptance_rate"] == 0.38
    assert drift["drift"] is False


def test_acceptance_far_below_the_certified_coverage_is_drift(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    _fill(url, accepted=10, total=100)
    drift = _stats(url, _artifact(tmp_path), capsys)
    assert drift["drift"] is True
    assert drift["p_value"] < 0.01
    assert "recalibrate" in drift["note"]
