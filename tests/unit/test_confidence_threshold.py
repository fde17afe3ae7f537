"""Threshold selection with a Clopper–Pearson guarantee, on sets whose answer is known."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import optimize
from tribunal.confidence import clopper_pearson_upper, select_risk_threshold
from tribunal.confidence._threshold import Decision, acceptance_outcome, decide, min_accepted_for
from tribunal.core import InvalidArgumentError

ALPHA, DELTA = 0.05, 0.1


def _upper_one_error(n: int, delta: float) -> float:
    """Closed form for one error: the p with P(X ≤ 1) = (1−p)^n + n·p·(1−p)^(n−1) = δ."""
    return float(
        optimize.brentq(
            lambda p: (1 - p) ** n + n * p * (1 - p) ** (n - 1) - delta, 1e-12, 1 - 1e-12
        )
    )


def _ranked_set(n: int, wrong_at: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Distinct confidences (n − i) / n for 1-based rank i; rank r in ``wrong_at`` is wrong."""
    confidence = np.array([(n - i) / n for i in range(n)])
    correct = np.ones(n, dtype=np.int64)
    correct[[r - 1 for r in wrong_at]] = 0
    return confidence, correct


def test_the_bound_matches_its_closed_forms() -> None:
    for n in (1, 10, 45, 200):
        assert clopper_pearson_upper(0, n, DELTA) == pytest.approx(1 - DELTA ** (1 / n), rel=1e-9)
    assert clopper_pearson_upper(1, 50, DELTA) == pytest.approx(
        _upper_one_error(50, DELTA), rel=1e-7
    )
    assert clopper_pearson_upper(3, 3, DELTA) == 1.0


def test_fewest_accepted_that_can_pass() -> None:
    # 1 − 0.1^(1/n) ≤ 0.05  ⇔  n ≥ ln 0.1 / ln 0.95 = 44.89…
    assert min_accepted_for(ALPHA, DELTA) == 45 == math.ceil(math.log(DELTA) / math.log(1 - ALPHA))
    assert min_accepted_for(0.10, DELTA) == 22
    assert min_accepted_for(0.01, DELTA) == 230


# The plan (items the scan never tests): 100 ranked items, wrong at every other rank from
# 60 on. It fixes the start: the grid point 0.48, where 105 of the 200 certify items are
# accepted.
PLAN = _ranked_set(100, wrong_at=list(range(60, 101, 2)))


def _reference_scan(
    confidence: np.ndarray, correct: np.ndarray, start: float, alpha: float
) -> tuple[float | None, int, int]:
    """The scan written out plainly: the start, then every distinct value below it."""
    chosen: tuple[float | None, int, int] = (None, 0, 0)
    for threshold in [start, *sorted({c for c in confidence if c < start}, reverse=True)]:
        accepted = confidence >= threshold
        errors = int((accepted & (correct == 0)).sum())
        if clopper_pearson_upper(errors, int(accepted.sum()), DELTA) > alpha:
            break
        chosen = (float(threshold), int(accepted.sum()), errors)
    return chosen


def test_the_scan_starts_at_the_planned_start_and_stops_at_the_first_failure() -> None:
    # Ranks 106–110 wrong, just under the start: the start (105 accepted, none wrong)
    # passes, the scan goes down one value at a time and stops at the third error (3 in
    # 108: bound 0.061 > 0.05). Accepting all 200 would pass on its own (5 errors: bound
    # 0.046), but testing past the failure would void the guarantee.
    confidence, correct = _ranked_set(200, wrong_at=list(range(106, 111)))
    chosen = select_risk_threshold(confidence, correct, alpha=ALPHA, delta=DELTA, plan=PLAN)
    assert _reference_scan(confidence, correct, 0.48, ALPHA) == (
        chosen.threshold,
        chosen.accepted,
        chosen.errors,
    )
    assert (chosen.threshold, chosen.accepted, chosen.errors, chosen.n) == (0.47, 107, 2, 200)
    assert chosen.upper_bound == pytest.approx(clopper_pearson_upper(2, 107, DELTA))
    assert clopper_pearson_upper(3, 108, DELTA) > ALPHA > clopper_pearson_upper(5, 200, DELTA)


def test_errors_above_the_start_do_not_end_the_scan_on_their_own() -> None:
    # One error at rank 10 ends a scan that starts at the fewest items that could pass
    # (45 at α = 0.05); from the planned start it is one error among 105.
    confidence, correct = _ranked_set(200, wrong_at=[10])
    chosen = select_risk_threshold(confidence, correct, alpha=ALPHA, delta=DELTA, plan=PLAN)
    assert (chosen.threshold, chosen.accepted, chosen.errors) == (0.005, 200, 1)
    assert chosen.upper_bound == pytest.approx(_upper_one_error(200, DELTA))


def test_no_threshold_qualifies_so_nothing_is_accepted() -> None:
    # Ranks 1–10 all wrong: the start's 105 items hold 10 errors (bound 0.14 > 0.05).
    confidence, correct = _ranked_set(200, wrong_at=list(range(1, 11)))
    chosen = select_risk_threshold(confidence, correct, alpha=ALPHA, delta=DELTA, plan=PLAN)
    assert chosen.threshold is None
    assert (chosen.accepted, chosen.coverage, chosen.upper_bound) == (0, 0.0, None)
    assert decide(1.0, chosen.threshold) is Decision.FALLBACK
    assert decide(1.0, chosen.threshold, escalate_band=0.5) is Decision.FALLBACK
    # Too few items to ever pass is the same answer.
    few = select_risk_threshold(np.linspace(1, 0.5, 30), np.ones(30), alpha=ALPHA, delta=DELTA)
    assert few.threshold is None


def test_ties_are_accepted_together() -> None:
    # 60 items tied at 0.9 (one wrong), then 100 right at distinct lower values.
    confidence = np.concatenate([np.full(60, 0.9), np.linspace(0.8, 0.1, 100)])
    correct = np.ones(160, dtype=np.int64)
    correct[59] = 0
    chosen = select_risk_threshold(confidence, correct, alpha=0.10, delta=DELTA, plan=PLAN)
    assert (chosen.accepted, chosen.errors) == (160, 1)  # bound 0.024
    only_ties = select_risk_threshold(
        confidence[:60], correct[:60], alpha=0.10, delta=DELTA, plan=(np.full(20, 0.9), np.ones(20))
    )
    assert (only_ties.threshold, only_ties.accepted, only_ties.errors) == (0.9, 60, 1)


def test_acceptance_outcome_counts_plain_thresholding() -> None:
    outcome = acceptance_outcome([0.9, 0.8, 0.6, 0.4], [1, 0, 1, 1], 0.5)
    assert (outcome.accepted, outcome.errors, outcome.n) == (3, 1, 4)
    assert outcome.hallucination_rate == pytest.approx(1 / 3)
    assert outcome.coverage == 0.75
    assert acceptance_outcome([0.4], [1], 0.5).hallucination_rate is None
    assert acceptance_outcome([0.4], [1], None).accepted == 0


def test_decisions_around_the_threshold_and_band() -> None:
    assert decide(0.8, 0.8, 0.1) is Decision.ACCEPT
    assert decide(0.75, 0.8, 0.1) is Decision.ESCALATE
    assert decide(0.71, 0.8, 0.1) is Decision.ESCALATE
    assert decide(0.69, 0.8, 0.1) is Decision.FALLBACK
    assert decide(0.79, 0.8) is Decision.FALLBACK


@pytest.mark.parametrize(("alpha", "delta", "field"), [(0.0, 0.1, "alpha"), (0.05, 1.0, "delta")])
def test_rates_outside_the_open_interval_are_refused(
    alpha: float, delta: float, field: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        select_risk_threshold([0.5], [1], alpha=alpha, delta=delta)
    assert caught.value.field == field
