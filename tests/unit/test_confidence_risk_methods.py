"""Every risk-control method keeps its promise on synthetic scores with a known error curve.

Scores s ~ U(0, 1) and P(wrong | s) = (1 − s)², so accepting at s ≥ λ has the true
hallucination rate r(λ) = E[(1 − s)² | s ≥ λ] = (1 − λ)² / 3. Each of 200 seeded
calibration draws (300 items) selects a threshold λ̂; the promise is
r(λ̂) ≤ α in at least (1 − δ) of the draws. The exact counts on these seeds are
asserted too, so a change in any method shows up here.
"""

from __future__ import annotations

import numpy as np
import pytest
from tribunal.confidence import (
    RISK_METHODS,
    binomial_p_value,
    clopper_pearson_upper,
    hoeffding_bentkus_p_value,
    select_threshold,
    start_count,
    threshold_grid,
)
from tribunal.confidence._learn_then_test import learn_then_test_threshold
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
    ("ltt", 0.1): (190, 189),
    ("ltt-hb", 0.1): (197, 149),
    ("sgr", 0.1): (199, 101),
    ("clopper-pearson", 0.2): (189, 199),
    ("ltt", 0.2): (187, 200),
    ("ltt-hb", 0.2): (196, 191),
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


def test_the_grid_is_fixed_and_descending() -> None:
    grid = threshold_grid(0.02)
    assert grid[0] == pytest.approx(0.98)
    assert grid[-1] == pytest.approx(0.02)
    assert grid.size == 49
    assert np.all(np.diff(grid) < 0)
    with pytest.raises(InvalidArgumentError):
        threshold_grid(0.0)


def test_ltt_stops_at_the_first_grid_point_it_cannot_reject() -> None:
    # 100 items at confidence 0.99 (all right), then 100 at 0.5 (half wrong): the grid
    # passes every point down to 0.52 (still the same 100 right items), then fails at
    # 0.50 and stops; the 0.5 items are never accepted.
    scores = np.r_[np.full(100, 0.99), np.full(100, 0.5)]
    correct = np.r_[np.ones(100), np.tile([0, 1], 50)].astype(int)
    chosen = learn_then_test_threshold(scores, correct, alpha=0.1, delta=DELTA)
    assert chosen.threshold == pytest.approx(0.52)
    assert (chosen.accepted, chosen.errors) == (100, 0)


def test_ltt_starts_where_a_few_errors_can_still_pass() -> None:
    # At α = 0.1, δ = 0.1 the sequence starts at 38 accepted (1 error still passes there),
    # so one wrong answer among the 10 most confident does not end it.
    assert start_count(0.1, DELTA, 300) == 38
    assert start_count(0.1, DELTA, 30) == min_accepted_for(0.1, DELTA)  # too few: no errors
    scores = np.linspace(1.0, 0.0, 300, endpoint=False)
    correct = np.ones(300, dtype=int)
    correct[[4, 150, 160, 170, 180, 190, 200, 210, 220, 230, 240]] = 0
    chosen = learn_then_test_threshold(scores, correct, alpha=0.1, delta=DELTA)
    scan = select_threshold(scores, correct, alpha=0.1, delta=DELTA, method="clopper-pearson")
    assert chosen.threshold is not None
    assert chosen.accepted > 100
    assert scan.threshold is None  # the full scan stops at the early error


def test_sgr_returns_nothing_when_every_tested_bound_is_above_alpha() -> None:
    scores = np.linspace(1, 0, 50)
    correct = np.tile([0, 1], 25)
    assert sgr_threshold(scores, correct, alpha=0.1, delta=DELTA).threshold is None


def test_unknown_method_is_refused_with_the_known_ones() -> None:
    with pytest.raises(InvalidArgumentError, match="clopper-pearson") as info:
        select_threshold([0.5], [1], alpha=0.1, delta=0.1, method="bonferroni")
    assert info.value.field == "method"
    assert set(RISK_METHODS) == {"clopper-pearson", "ltt", "ltt-hb", "sgr"}
