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


def test_lowest_threshold_whose_bound_is_below_alpha() -> None:
    # Ranks 1–49 correct, rank 50 wrong. Below 45 accepted nothing can pass
    # (1 − 0.1^(1/44) = 0.0510 > 0.05); 45..49 pass with no error; at 50 one error
    # gives a bound of 0.0756 > 0.05, so the scan stops: the threshold is rank 49's
    # confidence, (200 − 48) / 200 = 0.76, accepting 49 of 200.
    confidence, correct = _ranked_set(200, wrong_at=[50, 150])
    assert 1 - DELTA ** (1 / 44) > ALPHA >= 1 - DELTA ** (1 / 49)
    assert _upper_one_error(50, DELTA) > ALPHA
    chosen = select_risk_threshold(confidence, correct, alpha=ALPHA, delta=DELTA)
    assert chosen.threshold == 0.76
    assert (chosen.accepted, chosen.errors, chosen.n) == (49, 0, 200)
    assert chosen.coverage == pytest.approx(49 / 200)
    assert chosen.upper_bound == pytest.approx(1 - DELTA ** (1 / 49))


def test_the_scan_stops_at_the_first_failure() -> None:
    # One error at rank 46: accepting all 200 would pass on its own (bound 0.0194),
    # but the test at 46 failed first, and testing on would void the guarantee.
    confidence, correct = _ranked_set(200, wrong_at=[46])
    assert _upper_one_error(46, DELTA) > ALPHA > _upper_one_error(200, DELTA)
    chosen = select_risk_threshold(confidence, correct, alpha=ALPHA, delta=DELTA)
    assert chosen.threshold == (200 - 44) / 200
    assert chosen.accepted == 45


def test_a_larger_alpha_needs_fewer_items() -> None:
    # α = 0.10: 22 accepted with no error suffice (1 − 0.1^(1/22) = 0.0994); one error
    # at rank 30 gives a bound of 0.123 > 0.10, so the threshold is rank 29's confidence.
    confidence, correct = _ranked_set(200, wrong_at=[30, 31, 32])
    assert _upper_one_error(30, DELTA) > 0.10 >= 1 - DELTA ** (1 / 29)
    chosen = select_risk_threshold(confidence, correct, alpha=0.10, delta=DELTA)
    assert chosen.threshold == (200 - 28) / 200
    assert (chosen.accepted, chosen.errors) == (29, 0)


def test_no_threshold_qualifies_so_nothing_is_accepted() -> None:
    confidence, correct = _ranked_set(200, wrong_at=[10])
    chosen = select_risk_threshold(confidence, correct, alpha=ALPHA, delta=DELTA)
    assert chosen.threshold is None
    assert (chosen.accepted, chosen.coverage, chosen.upper_bound) == (0, 0.0, None)
    assert decide(1.0, chosen.threshold) is Decision.FALLBACK
    assert decide(1.0, chosen.threshold, escalate_band=0.5) is Decision.FALLBACK
    # Too few items to ever pass is the same answer.
    few = select_risk_threshold(np.linspace(1, 0.5, 30), np.ones(30), alpha=ALPHA, delta=DELTA)
    assert few.threshold is None


def test_ties_are_accepted_together() -> None:
    # 60 items tied at 0.9 (one wrong), then 100 correct at distinct lower values.
    confidence = np.concatenate([np.full(60, 0.9), np.linspace(0.8, 0.1, 100)])
    correct = np.ones(160, dtype=np.int64)
    correct[59] = 0
    chosen = select_risk_threshold(confidence, correct, alpha=0.10, delta=DELTA)
    assert chosen.accepted == 160  # 1 error in 160: bound 0.024
    only_ties = select_risk_threshold(confidence[:60], correct[:60], alpha=0.10, delta=DELTA)
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
