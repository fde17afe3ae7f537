"""Every risk-control method keeps its promise on synthetic scores with a known error curve.

Scores s ~ U(0, 1) and P(wrong | s) = (1 − s)², so accepting at s ≥ λ has the true
hallucination rate r(λ) = E[(1 − s)² | s ≥ λ] = (1 − λ)² / 3. Each of 200 seeded
calibration draws (300 items) selects a threshold λ̂; the promise is
r(λ̂) ≤ α in at least (1 − δ) of the draws. The exact counts on these seeds are
asserted too, so a change in any method shows up here. (The guarantee itself is proved
in the modules' docstrings; the simulation checks the code does what the proof says.)
"""

from __future__ import annotations

import numpy as np
import pytest
from tribunal.confidence import (
    RISK_METHODS,
    binomial_p_value,
    clopper_pearson_upper,
    hoeffding_bentkus_p_value,
    learn_then_test_threshold,
    select_threshold,
    start_count,
    threshold_grid,
)
from tribunal.confidence._risk_plan import Labelled, plan_and_test, plan_grid, plan_start
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


# (method, α) → (draws out of 200 where r(λ̂) ≤ α, draws that certified a threshold),
# with no plan given: each method plans on a seeded 30% of the 300 items.
EXPECTED = {
    ("clopper-pearson", 0.1): (194, 127),
    ("ltt", 0.1): (193, 127),
    ("ltt-hb", 0.1): (198, 95),
    ("sgr", 0.1): (200, 17),
    ("clopper-pearson", 0.2): (193, 196),
    ("ltt", 0.2): (194, 196),
    ("ltt-hb", 0.2): (197, 191),
    ("sgr", 0.2): (199, 193),
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
            # What it reports is what it did on the items it tested (not its plan's).
            _, tested = plan_and_test(scores, correct, None)
            assert chosen.n == tested.n == 210
            accepted = tested.confidence >= chosen.threshold
            correct_tested = tested.correct.astype(np.int64)
            assert chosen.accepted == int(accepted.sum())
            assert chosen.errors == int((accepted & (correct_tested == 0)).sum())
            assert chosen.upper_bound is not None
            assert chosen.upper_bound <= alpha
    assert held >= (1 - DELTA) * DRAWS
    assert (held, certified) == EXPECTED[(method, alpha)]


def _plan(seed: int, items: int = 150) -> tuple[np.ndarray, np.ndarray]:
    """Items the test never reads, from the same law (as the calibrator's fit queries)."""
    return _draw(10_000 + seed)[0][:items], _draw(10_000 + seed)[1][:items]


# (method, α) → (draws holding α, draws certified) when a separate plan is given.
EXPECTED_PLANNED = {
    ("clopper-pearson", 0.1): (189, 160),
    ("ltt", 0.1): (191, 160),
    ("ltt-hb", 0.1): (198, 138),
    ("sgr", 0.1): (200, 93),
}


@pytest.mark.parametrize(("method", "alpha"), sorted(EXPECTED_PLANNED))
def test_each_method_holds_alpha_with_a_separate_plan(method: str, alpha: float) -> None:
    held = certified = 0
    for seed in range(DRAWS):
        scores, correct = _draw(seed)
        plan = _plan(seed)
        chosen = select_threshold(
            scores, correct, alpha=alpha, delta=DELTA, method=method, plan=plan
        )
        assert chosen.n == ITEMS  # with a plan given, every item is tested
        held += _true_rate(chosen.threshold) <= alpha
        certified += chosen.threshold is not None
    assert held >= (1 - DELTA) * DRAWS
    assert (held, certified) == EXPECTED_PLANNED[(method, alpha)]


def _over_confident_top(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    # s ~ U(0, 1); wrong with 1 − s below 0.95 but with 0.4 above: the rate is not
    # monotone in λ, the case a start read off the certify items does not cover.
    scores = rng.uniform(size=n)
    wrong = rng.uniform(size=n) < np.where(scores >= 0.95, 0.4, 1.0 - scores)
    return scores, (~wrong).astype(np.int64)


def _over_confident_rate(threshold: float | None) -> float:
    if threshold is None:
        return 0.0
    low = min(threshold, 0.95)
    below = (0.95 - low) - (0.95**2 - low**2) / 2.0
    return (below + 0.4 * (1.0 - max(threshold, 0.95))) / (1.0 - threshold)


def test_planned_scans_hold_alpha_where_the_rate_is_not_monotone() -> None:
    outcome = {}
    for method in ("clopper-pearson", "ltt"):
        held = certified = 0
        for seed in range(DRAWS):
            rng = np.random.default_rng(seed)
            plan = _over_confident_top(rng, 150)
            scores, correct = _over_confident_top(rng, 350)
            chosen = select_threshold(
                scores, correct, alpha=0.2, delta=DELTA, method=method, plan=plan
            )
            held += _over_confident_rate(chosen.threshold) <= 0.2
            certified += chosen.certified
        assert held >= (1 - DELTA) * DRAWS
        outcome[method] = (held, certified)
    assert outcome == {"clopper-pearson": (195, 9), "ltt": (193, 9)}


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


def test_the_plan_split_depends_on_positions_only() -> None:
    values = np.linspace(0.0, 1.0, 100)
    labels = (np.arange(100) % 3 > 0).astype(int)
    plan, tested = plan_and_test(values, labels, None)
    plan_again, _ = plan_and_test(values[::-1], labels[::-1], None)
    assert (plan.n, tested.n) == (30, 70)
    # The same positions, whatever the values at them: positions 0..99 of the reversed
    # array hold values 1 − v, so the plan's values mirror.
    assert np.allclose(np.sort(1.0 - plan_again.confidence), np.sort(plan.confidence[::-1]))
    assert sorted(np.r_[plan.confidence, tested.confidence]) == sorted(values)
    given, every = plan_and_test(values, labels, (values[:10], labels[:10]))
    assert (given.n, every.n) == (10, 100)


def test_the_grid_is_the_plans_confidences_one_every_two_percent() -> None:
    plan = Labelled.of(np.linspace(0.99, 0.0, 100), np.ones(100))
    grid = plan_grid(plan)
    assert grid.size == 50  # ⌈0.02 · 100⌉ = 2 items a step
    assert grid[0] == pytest.approx(0.99)
    assert grid[1] == pytest.approx(0.97)
    assert np.all(np.diff(grid) < 0)
    with pytest.raises(InvalidArgumentError):
        plan_grid(plan, 0.0)


def test_the_start_is_where_the_plan_predicts_the_most_certified_coverage() -> None:
    # 200 plan items; errors only below 0.6. The certify part (300) passes at α = 0.1 down
    # to where the plan's error rate nears α, and the start is the last such grid point.
    confidence = np.linspace(0.999, 0.2, 200)
    correct = np.ones(200, dtype=int)
    correct[np.flatnonzero(confidence < 0.6)[::3]] = 0
    plan = Labelled.of(confidence, correct)
    grid = plan_grid(plan)
    start = plan_start(plan, grid, 300, alpha=0.1, delta=DELTA, test=binomial_p_value)
    assert (start, round(float(grid[start]), 4)) == (23, 0.6296)
    # Reads no certify item: only their count.
    assert start == plan_start(plan, grid, 300, alpha=0.1, delta=DELTA, test=binomial_p_value)


def test_every_method_tests_only_thresholds_fixed_by_the_plan() -> None:
    rng = np.random.default_rng(3)
    plan = _plan(3)
    scores, correct = _draw(3)
    grid = set(plan_grid(Labelled.of(*plan)).tolist())
    for method in ("ltt", "ltt-hb", "sgr"):
        chosen = select_threshold(scores, correct, alpha=0.2, delta=DELTA, method=method, plan=plan)
        assert chosen.threshold in grid
    # Flipping certify labels changes the outcome, never the tested grid.
    flipped = np.where(rng.uniform(size=ITEMS) < 0.2, 0, correct)
    chosen = select_threshold(scores, flipped, alpha=0.2, delta=DELTA, method="ltt", plan=plan)
    assert chosen.threshold is None or chosen.threshold in grid


def test_ltt_stops_at_the_first_grid_point_it_cannot_reject() -> None:
    # Plan and certify alike: 100 items at 0.99 (all right), 100 at 0.5 (half wrong). The
    # grid's 0.99 point passes, its 0.5 point accepts the wrong half too and fails.
    scores = np.r_[np.full(100, 0.99), np.full(100, 0.5)]
    correct = np.r_[np.ones(100), np.tile([0, 1], 50)].astype(int)
    chosen = learn_then_test_threshold(
        scores, correct, alpha=0.1, delta=DELTA, plan=(scores, correct)
    )
    assert chosen.threshold == pytest.approx(0.99)
    assert (chosen.accepted, chosen.errors) == (100, 0)


def test_a_planned_start_survives_an_error_among_the_most_confident() -> None:
    # One wrong answer among the 5 most confident would end a scan that starts at the
    # fewest items that could pass; the planned start accepts more at its first test.
    scores = np.linspace(0.999, 0.7, 300)
    correct = np.ones(300, dtype=int)
    correct[[4, 150, 160, 170, 180, 190, 200, 210, 220, 230, 240]] = 0
    plan = (np.linspace(0.999, 0.7, 100), np.r_[np.ones(50), np.tile([1, 1, 1, 0], 12), [1, 1]])
    for method in ("ltt", "clopper-pearson"):
        chosen = select_threshold(scores, correct, alpha=0.1, delta=DELTA, method=method, plan=plan)
        assert chosen.threshold is not None
        assert chosen.accepted > 100
        assert chosen.upper_bound is not None
        assert chosen.upper_bound <= 0.1


def test_sgr_returns_nothing_when_every_tested_bound_is_above_alpha() -> None:
    scores = np.linspace(1, 0, 50)
    correct = np.tile([0, 1], 25)
    assert sgr_threshold(scores, correct, alpha=0.1, delta=DELTA).threshold is None


def test_unknown_method_is_refused_with_the_known_ones() -> None:
    with pytest.raises(InvalidArgumentError, match="clopper-pearson") as info:
        select_threshold([0.5], [1], alpha=0.1, delta=0.1, method="bonferroni")
    assert info.value.field == "method"
    assert set(RISK_METHODS) == {"clopper-pearson", "ltt", "ltt-hb", "sgr"}
