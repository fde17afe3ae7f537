"""The inverse-probability-weighted risk control on seeded synthetic stratified samples:
the certified rate holds on the traffic in ≥ 1 − δ of the draws, and it certifies on every
label where thinning to one share keeps about a third of them."""

from __future__ import annotations

import numpy as np
import pytest
from tribunal.confidence._clopper_pearson import select_risk_threshold
from tribunal.confidence._weighted import betting_p_value, weighted_threshold

ALPHA, DELTA = 0.15, 0.1
PI_ACCEPT, PI_FALLBACK = 0.5, 0.1


def _rate_above(threshold: float) -> float:
    """P(wrong | confidence ≥ threshold) on the traffic: confidence ~ U(0, 1), wrong with
    probability 0.05 + 0.5 (1 − c)^1.5 (exact integral)."""
    return 0.05 + 0.5 * (1 - threshold) ** 1.5 / 2.5


def _audited(seed: int, n: int = 6000) -> tuple[np.ndarray, ...]:
    """Traffic, the served decision (ACCEPT more likely at high confidence), and the
    audit coin at π_a for ACCEPTs and π_f for FALLBACKs: the reviewed items."""
    rng = np.random.default_rng(seed)
    confidence = rng.uniform(size=n)
    wrong = rng.uniform(size=n) < 0.05 + 0.5 * (1 - confidence) ** 1.5
    accepted = rng.uniform(size=n) < confidence
    inclusion = np.where(accepted, PI_ACCEPT, PI_FALLBACK)
    sampled = rng.uniform(size=n) < inclusion
    keep_thin = rng.uniform(size=n) < PI_FALLBACK / inclusion
    return (
        confidence[sampled],
        ~wrong[sampled],
        (PI_FALLBACK / inclusion)[sampled],
        keep_thin[sampled],
    )


def _certify(confidence, right, weight):  # type: ignore[no-untyped-def]
    cut = confidence.size // 2  # the first half plans (as the fit queries do), the rest certify
    return weighted_threshold(
        confidence[cut:],
        right[cut:],
        weight[cut:],
        alpha=ALPHA,
        delta=DELTA,
        plan=(confidence[:cut], right[:cut], weight[:cut]),
    )


def test_the_weighted_certificate_holds_on_the_traffic_and_uses_every_label() -> None:
    violated, certified, weighted_labels, thinned_labels = 0, 0, 0, 0
    weighted_lambda, thinned_lambda = [], []
    for seed in range(200):
        confidence, right, weight, keep = _audited(seed)
        chosen = _certify(confidence, right, weight)
        weighted_labels += confidence.size
        thinned_labels += int(keep.sum())
        if chosen.threshold is not None:
            certified += 1
            violated += int(_rate_above(chosen.threshold) > ALPHA)
            weighted_lambda.append(chosen.threshold)
        cut = int(keep.sum()) // 2
        thin = select_risk_threshold(
            confidence[keep][cut:],
            right[keep][cut:],
            alpha=ALPHA,
            delta=DELTA,
            plan=(confidence[keep][:cut], right[keep][:cut]),
        )
        thinned_lambda.append(1.0 if thin.threshold is None else thin.threshold)
    # The statement: P(rate at the certified threshold > α) ≤ δ (20 of 200 allowed).
    assert violated <= DELTA * 200
    assert (violated, certified) == (4, 151)
    # Every label, against about a third when thinned to the smallest share.
    assert (weighted_labels, thinned_labels) == (360_894, 120_044)
    # Weighting keeps more of the traffic answered: a lower threshold, on average.
    assert np.mean(weighted_lambda) < np.mean(thinned_lambda)


def test_a_uniform_sample_gives_the_unweighted_test() -> None:
    rng = np.random.default_rng(3)
    x = (rng.uniform(size=400) < 0.05).astype(np.float64)
    # All accepted, all weight 1: X is the error indicator; 5% errors are credibly < 15%.
    assert betting_p_value(x, 0.15, 0.1) < 1e-3
    # Items not accepted (X = α) change nothing.
    assert betting_p_value(np.concatenate([x, np.full(300, 0.15)]), 0.15, 0.1) == pytest.approx(
        betting_p_value(x, 0.15, 0.1)
    )
    # At the null (mean = α) the test rarely passes.
    passes = sum(
        betting_p_value((np.random.default_rng(s).uniform(size=300) < 0.15) * 1.0, 0.15, 0.1) <= 0.1
        for s in range(300)
    )
    assert passes <= 30


@pytest.mark.parametrize(
    ("weight", "words"), [([0.5, 1.5], "in \\(0, 1\\]"), ([0.5], "2 items"), ([0.0, 1.0], "in")]
)
def test_bad_weights_say_what_to_fix(weight: list[float], words: str) -> None:
    with pytest.raises(Exception, match=words):
        weighted_threshold([0.9, 0.8], [1, 1], weight, alpha=0.1, delta=0.1)
