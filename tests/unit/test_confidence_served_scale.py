"""A stricter threshold of the served calibrator, certified on its audited ACCEPTs only,
on seeded synthetic streams: the certified rate holds on the traffic in ≥ 1 − δ of the
draws (uniform and confidence-stratified ACCEPT audits), and it certifies where the
weighted test on every label, fallbacks included, mostly cannot."""

from __future__ import annotations

import numpy as np
import pytest
from tribunal.confidence import served_threshold
from tribunal.confidence._weighted import weighted_threshold
from tribunal.core import InvalidArgumentError

ALPHA, DELTA = 0.1, 0.1
SERVED = 0.4
"""The served threshold: its rate on the traffic, 0.05 + 0.5·0.6^1.5 / 2.5 ≈ 0.143, is
above α (the shift the live bound showed); from about 0.60 up it is below."""
PI_ACCEPT, PI_FALLBACK = 0.5, 0.1
SEEDS = 300


def _rate_above(threshold: float) -> float:
    """P(wrong | confidence ≥ threshold) on the traffic: confidence ~ U(0, 1), wrong with
    probability 0.05 + 0.5 (1 − c)^1.5 (exact integral)."""
    return 0.05 + 0.5 * (1 - threshold) ** 1.5 / 2.5


def _stream(seed: int, accept_share: np.ndarray | None = None, n: int = 3000):  # type: ignore[no-untyped-def]
    """Served confidences, right or wrong, the served decision (ACCEPT iff c ≥ λ_s) and
    the audit coin: π_a per ACCEPT (or ``accept_share`` by stratum), π_f per FALLBACK."""
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(size=n)
    right = rng.uniform(size=n) >= 0.05 + 0.5 * (1 - confidence) ** 1.5
    accepted = confidence >= SERVED
    pi_accept = np.full(n, PI_ACCEPT) if accept_share is None else accept_share(confidence)
    inclusion = np.where(accepted, pi_accept, PI_FALLBACK)
    sampled = rng.uniform(size=n) < inclusion
    return confidence, right, accepted, inclusion, sampled


def test_the_served_threshold_holds_on_the_traffic_and_certifies_where_weighting_cannot() -> None:
    violated, certified, weighted_certified = 0, 0, 0
    thresholds = []
    for seed in range(SEEDS):
        confidence, right, accepted, inclusion, sampled = _stream(seed)
        mine = sampled & accepted
        chosen = served_threshold(
            confidence[mine], right[mine], served=SERVED, alpha=ALPHA, delta=DELTA
        )
        assert chosen.method == "clopper-pearson"  # one ACCEPT share: a uniform sample
        if chosen.threshold is not None:
            assert chosen.threshold >= SERVED
            certified += 1
            violated += int(_rate_above(chosen.threshold) > ALPHA)
            thresholds.append(chosen.threshold)
        # The weighted test on every label of the same scale, fallbacks weighing π_a / π_f.
        weighted = weighted_threshold(
            confidence[sampled],
            right[sampled],
            (PI_FALLBACK / inclusion)[sampled],
            alpha=ALPHA,
            delta=DELTA,
        )
        weighted_certified += int(weighted.threshold is not None)
    # The statement: P(rate at the certified threshold > α) ≤ δ (30 of 300 allowed).
    assert violated <= DELTA * SEEDS
    assert (violated, certified, weighted_certified) == (13, 136, 0)
    # Every certified threshold is at or above where the rate reaches α.
    assert min(thresholds) > SERVED


def test_confidence_strata_of_the_accepts_are_weighted_and_still_hold() -> None:
    def shares(confidence: np.ndarray) -> np.ndarray:
        return np.where(confidence < 0.8, 0.5, 0.1)  # audit.accept_strata {"0.8": 0.5}

    violated, certified = 0, 0
    for seed in range(SEEDS):
        confidence, right, accepted, inclusion, sampled = _stream(seed, shares)
        mine = sampled & accepted
        chosen = served_threshold(
            confidence[mine],
            right[mine],
            0.1 / inclusion[mine],  # u = π_floor / π, π_floor the smallest ACCEPT share
            served=SERVED,
            alpha=ALPHA,
            delta=DELTA,
        )
        assert chosen.method == "ipw-betting"
        if chosen.threshold is not None:
            certified += 1
            violated += int(_rate_above(chosen.threshold) > ALPHA)
    assert violated <= DELTA * SEEDS
    assert (violated, certified) == (2, 21)


def test_items_below_the_served_threshold_or_a_bad_threshold_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="audited ACCEPTs only"):
        served_threshold([0.3, 0.9], [1, 1], served=0.5, alpha=0.1, delta=0.1)
    with pytest.raises(InvalidArgumentError, match="served threshold"):
        served_threshold([0.9], [1], served=1.5, alpha=0.1, delta=0.1)
    with pytest.raises(InvalidArgumentError, match="weights"):
        served_threshold([0.9], [1], [0.0], served=0.5, alpha=0.1, delta=0.1)
