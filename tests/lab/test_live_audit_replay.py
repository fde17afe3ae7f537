"""The replay of ``tribunal-lab live-audit`` on a seeded synthetic shift: calibrate, serve,
audit half the ACCEPTs with a reviewer who answers from the ground truth, trip the
fail-safe, re-certify, and serve what ``--recertify`` picks — under the same live monitor.

The queries are synthetic (no model runs): each has one candidate whose signals carry a
quality; before the shift the candidate is right with probability = its quality + 0.2, after it
the mid-quality ones are worse (and a fifth of the queries have no answer), while the
top-quality ones stay right: the served threshold's rate rises above α, and a stricter
threshold of the same calibrator keeps it.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tribunal.confidence import (
    CalibrationConfig,
    ObservedCandidate,
    Signals,
    calibrate,
    read_traffic,
)
from tribunal_lab.commands._live_audit_replay import Replay
from tribunal_lab.commands._live_audit_report import write_report

from tests.unit._confidence_data import BINDING

_CALIBRATION, _BEFORE, _AFTER = 600, 200, 900


def _queries(seed: int = 0) -> tuple[list[dict[str, Any]], list[list[ObservedCandidate]]]:
    rng = np.random.default_rng(seed)
    rows: list[dict[str, Any]] = []
    observed: list[list[ObservedCandidate]] = []
    for i in range(_CALIBRATION + _BEFORE + _AFTER):
        shifted = i >= _CALIBRATION + _BEFORE
        in_scope = rng.random() >= (0.2 if shifted else 0.1)
        quality = float(rng.beta(5, 2) if in_scope else rng.beta(2, 3))
        if not in_scope:
            right = False
        elif shifted and quality < 0.8:
            right = bool(rng.random() < quality - 0.1)
        else:
            right = bool(rng.random() < (0.98 if shifted else quality + 0.2))
        entry = f"e{i % 40}"
        rows.append(
            {
                "query": f"q{i}",
                "answers": [entry] if in_scope else [],
                "kind": "in_scope" if in_scope else "out_of_scope",
            }
        )
        noise = rng.normal(0, 0.03)
        dense = (0.5 + 0.4 * quality if in_scope else 0.2 + 0.3 * quality) + noise
        dense -= 0.3 if shifted else 0.0  # the shift warning's signal
        observed.append(
            [
                ObservedCandidate(
                    entry if right else f"x{i % 7}",
                    Signals(
                        ensemble_p_match=float(np.clip(quality + noise, 0, 1)),
                        retrieval_rank=1,
                        dense_score=float(np.clip(dense, -1, 1)),
                    ),
                )
            ]
        )
    return rows, observed


def _replay(tmp_path: Path, recertify: str) -> dict[str, Any]:
    rows, observed = _queries()
    path = tmp_path / "traffic.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    traffic = read_traffic(path)
    calibration = tmp_path / "calibration.jsonl"
    calibration.write_text("".join(json.dumps(row) + "\n" for row in rows[:_CALIBRATION]))
    result = calibrate(
        read_traffic(calibration),
        observed[:_CALIBRATION],
        CalibrationConfig(alphas=(0.1, 0.2), delta=0.1, seed=0),
        BINDING,
        created="2026-12-02T00:00:00+00:00",
    )
    args = argparse.Namespace(
        alpha=0.2,
        delta=0.05,
        accept_share=0.5,
        fallback_share=0.1,
        seed=0,
        safe_queries=100,
        recertify=recertify,
        out=tmp_path,
    )
    replay = Replay(
        args=args,
        collection=BINDING.collection,
        artifact=result.artifact,
        binding=BINDING,
        observed=observed,
        traffic=traffic,
        database_url=f"sqlite:///{tmp_path / 'live.db'}",
    )
    start = _CALIBRATION + _BEFORE
    live = [("before", i) for i in range(_CALIBRATION, start)] + [
        ("after", i) for i in range(start, len(rows))
    ]
    report = replay.run(live, kinds=[row["kind"] for row in rows])
    report.update(command="test", date="2026-12-02")
    write_report(report, tmp_path)
    return report


@pytest.mark.slow
# ~2 min of CPU (one review refreshes the monitor): `make test-all` runs it; CI covers
# the product's re-certification choices in tests/integration/test_audit_recertify_cli.py.
@pytest.mark.extended
@pytest.mark.timeout(1200)
def test_the_replay_serves_the_rethresholded_calibrator_after_the_trip(tmp_path: Path) -> None:
    report = _replay(tmp_path, "rethreshold")
    segments, events = report["segments"], report["events"]
    # The shift warning restarts a bound 36 queries after the shift; it trips after 132
    # audited answers since then, on the rate of the answers served after the shift.
    assert events["shift_warning"]["queries_after_shift"] == 36
    assert (events["trip"]["queries_after_shift"], events["trip"]["audited_since_restart"]) == (
        377,
        132,
    )
    assert (segments["shifted"]["accepted"], segments["shifted"]["wrong"]) == (308, 114)
    recertification = events["recertification"]
    # The weighted refit certifies nothing at α = 0.2; the served calibrator's ACCEPTs
    # certify a stricter threshold of it, and that artifact is served from then on.
    assert recertification["certified"] is False
    assert recertification["served_scale"]["accepts"] == 132
    served = recertification["served"]
    assert served["chosen"] == "rethreshold"
    assert served["version"] != recertification["old_version"]
    assert served["threshold"] == pytest.approx(0.53912, abs=5e-6)
    assert served["upper_bound"] == pytest.approx(0.19914, abs=5e-6)
    after = segments["recertified"]
    assert (after["queries"], after["accepted"], after["wrong"], after["accepted_oos"]) == (
        423,
        72,
        7,
        0,
    )
    assert after["labels"] == 82  # audits go on, on the served artifact's decisions
    # What it served is what the same threshold counts on the same queries.
    beside = report["recertified_by"]
    assert (beside["served@0.2"]["accepted"], beside["served@0.2"]["wrong"]) == (72, 7)
    assert beside["ipw@0.2"]["accepted"] == 0
    # The live monitor ran on the served artifact after re-certifying, and held.
    assert [t["calibrator"] for t in report["trace"]][-1] == served["version"]
    assert "trip_after_recertification" not in events
    assert "safe_mode_again" not in segments
    # Best certifies each at δ/2: there, neither certifies α = 0.2 on these labels.
    assert recertification["best"]["chosen"] == "refit"
    assert recertification["best"]["rethreshold"]["threshold"] is None
    table = (tmp_path / "live-audit.md").read_text()
    assert "| after re-certification (served) | 423 | 72 |" in table
