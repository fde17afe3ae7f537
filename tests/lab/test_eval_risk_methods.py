"""`tribunal-lab eval risk-methods`: the synthetic laws' exact rates, the summary's
arithmetic, and one small seeded run end to end."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate
from tribunal_lab.evaluation import risk_methods as rm


def test_each_synthetic_law_has_the_rate_its_draws_show() -> None:
    rng = np.random.default_rng(0)
    for law in rm._laws():
        confidence, correct = law.draw(rng, 400_000)
        for threshold in (0.5, 0.8, 0.9, 0.97):
            accepted = confidence >= threshold
            observed = float((correct[accepted] == 0).mean())
            assert law.rate(threshold) == pytest.approx(observed, abs=0.01), law.name


def test_the_over_confident_law_is_not_monotone_in_the_threshold() -> None:
    law = {law.name: law for law in rm._laws()}["over-confident top"]

    def wrong(c: float) -> float:
        return 0.4 if c >= 0.95 else 1.0 - c

    for threshold in (0.3, 0.85, 0.96):
        exact = integrate.quad(wrong, threshold, 1.0, points=[0.95])[0] / (1.0 - threshold)
        assert law.rate(threshold) == pytest.approx(exact, rel=1e-9)
    # Above 0.95 the rate is 0.4; just below it falls (well-calibrated items join).
    assert law.rate(0.97) == pytest.approx(0.4)
    assert law.rate(0.85) < 0.2 < law.rate(0.5)


def test_the_summary_counts_coverage_as_zero_when_nothing_is_certified() -> None:
    rows = [
        {"certified": True, "coverage": 0.6, "risk": 0.08, "accepted": 60, "wrong": 5},
        {"certified": True, "coverage": 0.5, "risk": 0.12, "accepted": 50, "wrong": 6},
        {"certified": False, "coverage": 0.0, "risk": None, "accepted": 0, "wrong": 0},
        {"certified": False, "coverage": 0.0, "risk": None, "accepted": 0, "wrong": 0},
    ]
    summary = rm.summarise(rows, alpha=0.1, delta=0.1)
    assert summary["certified"] == 0.5
    assert summary["coverage"] == pytest.approx(0.275)
    assert summary["coverage_when_certified"] == pytest.approx(0.55)
    assert summary["over_alpha"] == 0.25
    assert summary["held_when_certified"] == 0.5
    assert summary["pooled_risk"] == pytest.approx(11 / 110)
    assert summary["valid"] is False


@pytest.mark.extended
def test_a_small_synthetic_run_writes_its_tables(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    rm.add_arguments(parser)
    args = parser.parse_args(
        ["--domain", "synthetic", "--splits", "3", "--alpha", "0.2", "--out", str(tmp_path)]
    )
    assert rm.run(args) == 0
    summary = json.loads((tmp_path / "risk-methods.json").read_text())
    laws = {f"synthetic: {law.name}" for law in rm._laws()}
    assert set(summary["domains"]) == laws
    bunched = summary["domains"]["synthetic: bunched high"]["0.2"]
    assert set(bunched) == {"clopper-pearson", "ltt", "ltt-hb", "sgr"}
    assert all(row["splits"] == 3 for row in bunched.values())
    # Seeded: the same run gives the same figures.
    assert rm.run(args) == 0
    assert json.loads((tmp_path / "risk-methods.json").read_text())["domains"] == summary["domains"]
    assert "| synthetic: bunched high | 0.2 |" in (tmp_path / "risk-methods.md").read_text()
