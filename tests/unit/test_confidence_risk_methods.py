"""Every risk-control method keeps its promise on synthetic scores with a known error curve.

Scores s ~ U(0, 1) and P(wrong | s) = (1 − s)², so accepting at s ≥ λ has the true
hallucination rate r(λ) = E[(1 − s)² | s ≥ λ] = (1 − λ)² / 3. Each of 200 seeded
calibration draws (300 items) selects a threshold λ̂; the promise is
r(λ̂) ≤ α in at least (1 − δ) of the draws. The exact counts on these seeds are
asserted too, so a change in any method shows up here.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
from tribunal.confidence import (
    RISK_METHODS,
    binomial_p_value,
    clopper_pearson_upper,
    count_grid,
    hoeffding_bentkus_p_value,
    learn_then_test_threshold,
    predicted_start,
    select_threshold,
    start_count,
    threshold_grid,
)
from tribunal.confidence._sgr import sgr_threshold
from tribunal.confidence._threshold import min_accepted_for
from tribunal.core import InvalidArgumentError

DELTA = 0.1
DRAWS = 200
ITEMS = 300


def _true_rate(threshold: float | None) -> float:
    return 0.0 if threshold is None else (1.0 - threshold) ** 2 / 3.0


def _draw(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    scores = rng.uniform(size=ITEMS)
    wrong = rng.uniform(size=ITEMS) < (1.0 - scores) ** 2
    return scores, (~wrong).astype(np.int64)


# (method, α) → (draws out of 200 where r(λ̂) ≤ α, draws that certified a threshold).
EXPECTED = {
    ("clopper-pearson", 0.1): (189, 187),
    ("ltt", 0.1): (192, 187),
    ("ltt-hb", 0.1): (199, 187),
    ("sgr", 0.1): (199, 101),
    ("clopper-pearson", 0.2): (189, 199),
    ("ltt", 0.2): (191, 200),
    ("ltt-hb", 0.2): (198, 200),
    ("sgr", 0.2): (199, 200),
}


@pytest.mark.parametrize(("method", "alpha"), sorted(EXPECTED))
def test_each_method_holds_alpha_in_at_least_one_minus_delta_of_draws(
    method: str, alpha: float
) -> None:
    held = certified = 0
    for seed in range(DRAWS):
        scores, correct = _draw(seed)
        chosen = select_threshold(scores, correct, alpha=alpha, delta=DELTA, method=method)
        assert chosen.method == method
        held += _true_rate(chosen.threshold) <= alpha
        certified += chosen.threshold is not None
        if chosen.threshold is not None:
            # What it reports is what it did on the calibration items.
            accepted = scores >= chosen.threshold
            assert chosen.accepted == int(accepted.sum())
            assert chosen.errors == int((accepted & (correct == 0)).sum())
            assert chosen.upper_bound is not None
            assert chosen.upper_bound <= alpha
    assert held >= (1 - DELTA) * DRAWS
    assert (held, certified) == EXPECTED[(method, alpha)]


# Calibrated confidences (P(correct | s), as a calibrator outputs) in two shapes where a
# grid of fixed confidence steps is poorly placed: bunched high (Beta(6, 2) scores), and a
# mixture with 30 % out-of-scope queries. r(λ) by exact integration.
def _wrong_bunched(s: np.ndarray) -> np.ndarray:
    return np.clip(1.2 * (1.0 - s) ** 1.5, 0.0, 1.0)


def _scenario(name: str, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    if name == "bunched":
        s = rng.beta(6, 2, size=n)
        wrong = _wrong_bunched(s)
    else:
        out = rng.uniform(size=n) < 0.3
        s = np.where(out, rng.beta(2, 5, size=n), rng.beta(5, 1.5, size=n))
        wrong = np.where(out, 0.95, 0.5 * (1 - s) ** 2 + 0.02)
    return 1.0 - wrong, wrong


@functools.lru_cache(maxsize=4096)
def _true_rate_of(name: str, threshold: float | None) -> float:
    from scipy import integrate, optimize, stats

    if threshold is None:
        return 0.0
    if name == "bunched":
        # confidence 1 − w(s) is increasing in s: accept s ≥ s*.
        cut = optimize.brentq(lambda s: 1.0 - _wrong_bunched(np.array(s)) - threshold, 0, 1)
        mass = stats.beta.sf(cut, 6, 2)
        errors = integrate.quad(
            lambda s: stats.beta.pdf(s, 6, 2) * _wrong_bunched(np.array(s)), cut, 1
        )[0]
        return float(errors / mass)
    # Mixture: out-of-scope items (confidence 0.05) are accepted only at λ ≤ 0.05.
    answerable_cut = (
        optimize.brentq(lambda s: 0.98 - 0.5 * (1 - s) ** 2 - threshold, 0, 1)
        if threshold > 0.48
        else 0.0
    )
    mass = 0.7 * stats.beta.sf(answerable_cut, 5, 1.5)
    errors = (
        0.7
        * integrate.quad(
            lambda s: stats.beta.pdf(s, 5, 1.5) * (0.5 * (1 - s) ** 2 + 0.02), answerable_cut, 1
        )[0]
    )
    if threshold <= 0.05:
        mass, errors = mass + 0.3, errors + 0.3 * 0.95
    return float(errors / mass)


# (scenario, n, α, start) → (draws holding α, draws certified, mean accepted share).
LTT_EXPECTED = {
    ("bunched", 300, 0.1, "predicted"): (191, 175, 0.399),
    ("bunched", 300, 0.1, "top"): (195, 163, 0.28),
    ("mixture", 150, 0.1, "predicted"): (200, 163, 0.526),
    ("mixture", 150, 0.1, "top"): (200, 125, 0.31),
}


@pytest.mark.parametrize(("scenario", "n", "alpha", "start"), sorted(LTT_EXPECTED))
def test_ltt_holds_alpha_on_calibrated_confidences_from_either_start(
    scenario: str, n: int, alpha: float, start: str
) -> None:
    held = certified = 0
    coverage = 0.0
    for seed in range(DRAWS):
        rng = np.random.default_rng(seed)
        confidence, wrong = _scenario(scenario, rng, n)
        correct = (rng.uniform(size=n) >= wrong).astype(np.int64)
        chosen = learn_then_test_threshold(
            confidence,
            correct,
            alpha=alpha,
            delta=DELTA,
            start=start,  # type: ignore[arg-type]
        )
        held += _true_rate_of(scenario, chosen.threshold) <= alpha
        certified += chosen.certified
        coverage += chosen.coverage
    assert held >= (1 - DELTA) * DRAWS
    assert (held, certified, round(coverage / DRAWS, 3)) == LTT_EXPECTED[
        (scenario, n, alpha, start)
    ]


def test_the_predicted_start_certifies_more_than_the_top_start() -> None:
    # The comparison behind the default, on the seeded draws above.
    for key in (("bunched", 300, 0.1), ("mixture", 150, 0.1)):
        predicted = LTT_EXPECTED[(*key, "predicted")]
        top = LTT_EXPECTED[(*key, "top")]
        assert predicted[1] >= top[1]
        assert predicted[2] > top[2]


def test_binomial_p_value_rejects_exactly_where_clopper_pearson_does() -> None:
    for accepted in (22, 40, 90):
        for errors in range(0, 8):
            rejects = binomial_p_value(errors, accepted, 0.1) <= DELTA
            assert rejects == (clopper_pearson_upper(errors, accepted, DELTA) <= 0.1)


def test_hoeffding_bentkus_is_never_less_conservative_than_binomial_for_zero_one_loss() -> None:
    for accepted in (25, 60, 150):
        for errors in range(0, 12):
            assert (
                hoeffding_bentkus_p_value(errors, accepted, 0.1)
                >= binomial_p_value(errors, accepted, 0.1) - 1e-12
            )


def test_the_labelling_plans_confidence_grid_is_fixed_and_descending() -> None:
    grid = threshold_grid(0.02)
    assert grid[0] == pytest.approx(0.98)
    assert grid[-1] == pytest.approx(0.02)
    assert grid.size == 49
    assert np.all(np.diff(grid) < 0)
    with pytest.raises(InvalidArgumentError):
        threshold_grid(0.0)
    assert start_count(0.1, DELTA, 300) == 38
    assert start_count(0.1, DELTA, 30) == min_accepted_for(0.1, DELTA)


def test_ltt_steps_by_accepted_items_from_the_fewest_that_could_pass() -> None:
    grid = count_grid(300, 0.1, DELTA)
    assert grid[0] == min_accepted_for(0.1, DELTA) == 22
    assert np.all(np.diff(grid) == 6)  # ⌈0.02 · 300⌉
    assert count_grid(10, 0.1, DELTA).size == 0
    with pytest.raises(InvalidArgumentError):
        count_grid(300, 0.1, DELTA, 0.0)


def test_ltt_stops_at_the_first_grid_point_it_cannot_reject() -> None:
    # 100 items at confidence 0.99 (all right), then 100 at 0.5 (half wrong): every grid
    # point up to 100 accepted is the 0.99 tie (passes), the next accepts the 0.5 items
    # too and fails; the 0.5 items are never accepted.
    scores = np.r_[np.full(100, 0.99), np.full(100, 0.5)]
    correct = np.r_[np.ones(100), np.tile([0, 1], 50)].astype(int)
    for start in ("predicted", "top"):
        chosen = learn_then_test_threshold(scores, correct, alpha=0.1, delta=DELTA, start=start)  # type: ignore[arg-type]
        assert chosen.threshold == pytest.approx(0.99)
        assert (chosen.accepted, chosen.errors) == (100, 0)


def test_ltt_with_a_predicted_start_survives_an_error_among_the_most_confident() -> None:
    # One wrong answer among the 10 most confident ends a scan from the top (the full
    # Clopper-Pearson scan and ltt's top start); the predicted start begins where the
    # calibrator expects a few errors to pass and goes on.
    scores = np.linspace(0.999, 0.7, 300)
    correct = np.ones(300, dtype=int)
    correct[[4, 150, 160, 170, 180, 190, 200, 210, 220, 230, 240]] = 0
    chosen = learn_then_test_threshold(scores, correct, alpha=0.1, delta=DELTA)
    top = learn_then_test_threshold(scores, correct, alpha=0.1, delta=DELTA, start="top")
    scan = select_threshold(scores, correct, alpha=0.1, delta=DELTA, method="clopper-pearson")
    assert chosen.threshold is not None
    assert chosen.accepted > 100
    assert top.threshold is None
    assert scan.threshold is None
    assert predicted_start(scores, 0.1, DELTA, count_grid(300, 0.1, DELTA)) > 0


def test_sgr_returns_nothing_when_every_tested_bound_is_above_alpha() -> None:
    scores = np.linspace(1, 0, 50)
    correct = np.tile([0, 1], 25)
    assert sgr_threshold(scores, correct, alpha=0.1, delta=DELTA).threshold is None


def test_unknown_method_is_refused_with_the_known_ones() -> None:
    with pytest.raises(InvalidArgumentError, match="clopper-pearson") as info:
        select_threshold([0.5], [1], alpha=0.1, delta=0.1, method="bonferroni")
    assert info.value.field == "method"
    assert set(RISK_METHODS) == {"clopper-pearson", "ltt", "ltt-hb", "sgr"}
