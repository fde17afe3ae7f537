"""How many labelled queries would certify an α that is not: exact on fixed inputs."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from scipy import stats
from tribunal.confidence import (
    CalibrationConfig,
    CalibratorArtifact,
    artifact_not_certified,
    calibrate,
    calibration_markdown,
    certify_curve,
    queries_to_certify,
)
from tribunal.core import InvalidArgumentError

from tests.unit.test_confidence_calibrate import BINDING, _traffic


def _first_accepted_count(errors: int, accepted: int, alpha: float, level: float) -> int:
    """The reference: a plain scalar scan to 3,000 accepted, errors at today's rate rounded
    up; one past the last count whose bound is above α."""
    last_failure = 0
    for count in range(1, 3001):
        wrong = math.ceil(errors * count / accepted)
        if wrong >= count or stats.beta.ppf(1 - level, wrong + 1, count - wrong) > alpha:
            last_failure = count
    assert last_failure < 2500, "the reference's horizon is too short"
    return last_failure + 1


def test_no_error_needs_the_zero_error_count_scaled_by_coverage_and_split() -> None:
    # 50 of 100 certify queries accepted, none wrong; 200 labelled queries in all.
    estimate = queries_to_certify(
        [50], [0], certify_queries=100, labelled_queries=200, alpha=0.1, delta=0.1, method="ltt"
    )
    # A bound 1 − δ^(1/A) ≤ α first at A = ⌈ln δ / ln(1 − α)⌉ = 22 accepted queries:
    accepted = math.ceil(math.log(0.1) / math.log(0.9))
    assert accepted == 22
    assert estimate.certify_needed == math.ceil(accepted * 100 / 50) == 44
    assert estimate.labelled_needed == math.ceil(44 * 200 / 100) == 88
    assert estimate.more == 0
    assert estimate.bound == pytest.approx(1 - 0.1 ** (1 / 50))
    assert (estimate.accepted, estimate.errors) == (50, 0)


def test_the_best_threshold_is_the_point_needing_fewest_labelled_queries() -> None:
    curve = {"accepted": [10, 20, 40, 52, 65, 78, 100, 115], "errors": [0, 1, 2, 2, 3, 8, 15, 25]}
    common = {"certify_queries": 115, "labelled_queries": 240, "delta": 0.1}
    estimate = queries_to_certify(**curve, **common, alpha=0.05, method="clopper-pearson")
    # Only the first point's rate (0 of 10) is below 0.05: 45 accepted at 10/115 coverage.
    assert _first_accepted_count(0, 10, 0.05, 0.1) == 45
    assert estimate.certify_needed == math.ceil(45 * 115 / 10) == 518
    assert estimate.labelled_needed == math.ceil(518 * 240 / 115) == 1082
    assert estimate.more == 1082 - 240
    # Every point scanned by the reference: the estimate is their minimum.
    needed = [
        math.ceil(_first_accepted_count(e, a, 0.1, 0.1) * 115 / a)
        for a, e in zip(curve["accepted"], curve["errors"], strict=True)
        if e < 0.1 * a
    ]
    at_01 = queries_to_certify(**curve, **common, alpha=0.1, method="ltt")
    assert at_01.certify_needed == min(needed) == 144
    # 2 wrong of 52 passes today (bound 0.0991 ≤ 0.1) only because 3 wrong would come at
    # 53: at that rate the bound stays ≤ 0.1 from 65 accepted on, i.e. 144 certify queries.
    assert (at_01.accepted, at_01.errors) == (52, 2)
    assert at_01.bound == pytest.approx(stats.beta.ppf(0.9, 3, 50))
    assert at_01.labelled_needed == math.ceil(144 * 240 / 115) == 301
    assert at_01.more == 61
    # ltt's and clopper-pearson's tests are the same binomial test.
    assert queries_to_certify(**curve, **common, alpha=0.1, method="clopper-pearson") == (
        at_01.__class__(**{**at_01.__dict__, "method": "clopper-pearson"})
    )
    # sgr tests each grid point at δ / 15; ltt-hb's p-value is never below the binomial one.
    sgr = queries_to_certify(**curve, **common, alpha=0.1, method="sgr")
    sgr_needed = min(
        math.ceil(_first_accepted_count(e, a, 0.1, 0.1 / 15) * 115 / a)
        for a, e in zip(curve["accepted"], curve["errors"], strict=True)
        if e < 0.1 * a
    )
    assert sgr.certify_needed == sgr_needed
    hb = queries_to_certify(**curve, **common, alpha=0.1, method="ltt-hb")
    assert hb.certify_needed is not None
    assert hb.certify_needed >= at_01.certify_needed


def test_a_rate_above_alpha_everywhere_is_not_reachable_by_labelling_alone() -> None:
    estimate = queries_to_certify(
        [10, 20],
        [2, 5],
        certify_queries=20,
        labelled_queries=40,
        alpha=0.1,
        delta=0.1,
        method="ltt",
    )
    assert estimate.labelled_needed is None
    assert estimate.more is None
    assert not estimate.reachable
    lowest = min(stats.beta.ppf(0.9, 3, 8), stats.beta.ppf(0.9, 6, 15))
    assert estimate.bound == pytest.approx(lowest)  # 5 of 20: the lower of the two bounds
    assert (estimate.accepted, estimate.errors) == (20, 5)


def test_bad_curves_and_arguments_are_refused() -> None:
    good = {"certify_queries": 10, "labelled_queries": 20, "alpha": 0.1, "delta": 0.1}
    for accepted, errors in (([5, 5], [0, 0]), ([5], [6]), ([11], [0]), ([3, 5], [2, 1])):
        with pytest.raises(InvalidArgumentError, match="certify curve"):
            queries_to_certify(accepted, errors, **good, method="ltt")
    with pytest.raises(InvalidArgumentError, match="unknown risk-control method"):
        queries_to_certify([5], [0], **good, method="bonferroni")
    with pytest.raises(InvalidArgumentError, match="labelled queries"):
        queries_to_certify([5], [0], **{**good, "labelled_queries": 5}, method="ltt")
    with pytest.raises(InvalidArgumentError, match="alpha"):
        queries_to_certify([5], [0], **{**good, "alpha": 1.5}, method="ltt")


def test_the_curve_counts_ties_together() -> None:
    assert certify_curve([0.9, 0.8, 0.8, 0.3], [1, 0, 1, 0]) == {
        "accepted": [1, 3, 4],
        "errors": [0, 1, 2],
    }


def test_calibration_records_the_curve_and_says_what_would_certify(tmp_path: Path) -> None:
    traffic, observed = _traffic()
    config = CalibrationConfig(alphas=(0.001, 0.2), delta=0.1, method="ltt")
    result = calibrate(traffic, observed, config, BINDING, created="2026-12-01T00:00:00+00:00")
    artifact = CalibratorArtifact.load(result.artifact.save(tmp_path / "calibrator.json"))
    split = artifact.training_data["split"]
    curve = artifact.metrics["certify_curve"]
    assert curve["accepted"][-1] == split["risk"]
    strict = result.report["per_alpha"][0]
    assert strict["threshold"] is None  # α = 0.001 needs ≥ 2,302 accepted, none wrong
    expected = queries_to_certify(
        curve["accepted"],
        curve["errors"],
        certify_queries=split["risk"],
        labelled_queries=len(traffic),
        alpha=0.001,
        delta=0.1,
        method="ltt",
    )
    assert strict["to_certify"] == expected.to_dict()
    message = artifact_not_certified(artifact, 0.001)
    assert message.startswith(f"alpha=0.001 is not certified on {len(traffic)} labelled queries")
    # The synthetic certify split has a clean top (91 accepted, none wrong): reachable.
    assert expected.more
    assert f"about {expected.labelled_needed} labelled queries in all" in message
    assert f"- {message}." in calibration_markdown(result.report)


def test_a_tunes_queries_count_towards_the_labelled_queries_needed() -> None:
    traffic, observed = _traffic()
    config = CalibrationConfig(alphas=(0.001,), delta=0.1, method="ltt")
    labelled = 3 * len(traffic)  # a tune used two thirds of the labelled queries
    result = calibrate(traffic, observed, config, BINDING, labelled_queries=labelled)
    artifact = result.artifact
    assert artifact.training_data["labelled_queries"] == labelled
    curve, split = artifact.metrics["certify_curve"], artifact.training_data["split"]
    expected = queries_to_certify(
        curve["accepted"],
        curve["errors"],
        certify_queries=split["risk"],
        labelled_queries=labelled,
        alpha=0.001,
        delta=0.1,
        method="ltt",
    )
    assert result.report["per_alpha"][0]["to_certify"] == expected.to_dict()
    message = artifact_not_certified(artifact, 0.001)
    assert message.startswith(f"alpha=0.001 is not certified on {labelled} labelled queries")
    # Without a tune nothing extra is recorded (the artifact's content stays as it was).
    plain = calibrate(traffic, observed, config, BINDING, labelled_queries=len(traffic))
    assert "labelled_queries" not in plain.artifact.training_data
