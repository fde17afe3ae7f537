"""Learn-then-Test: binomial p-values on a planned grid, tested in fixed sequence.

Learn-then-Test (Angelopoulos, Bates, Candès, Jordan & Lei, 2021) turns risk
control into multiple testing: each threshold λ of a grid is a null hypothesis
H_λ: "P(wrong | confidence ≥ λ) > α", with a p-value from the certify items
accepted at λ. The grid is tested from its start down (fixed-sequence testing);
the scan stops at the first p-value above δ and the lowest threshold rejected is
returned.

**The grid and the start come from the plan** (:mod:`._risk_plan`): labelled
items the test never reads — the calibrator's fit queries in ``tribunal
calibrate``, else a seeded 30% of the items handed in. The grid is the plan's
confidences, one every 2% of its items; the start is the grid point where the
plan predicts the most certified coverage.

**Guarantee.** If the certify items and future traffic are exchangeable (i.i.d.
from one distribution) and neither the calibrator nor the plan used the certify
items, then with probability ≥ 1 − δ over the certify draw the returned λ̂
satisfies P(wrong | confidence ≥ λ̂) ≤ α on future traffic. Proof: given the plan,
the grid λ₁ > λ₂ > … and the start s are constants. Given the number n_j of
certify items accepted at λ_j, their errors are Binomial(n_j, r(λ_j)) exactly, so
p_j is a valid p-value for H_{λ_j}: P(p_j ≤ δ) ≤ δ when r(λ_j) > α. In a fixed
sequence that stops at its first non-rejection, a false rejection needs the first
true null of the sequence, a fixed hypothesis, to be rejected — probability ≤ δ.
Every threshold the scan passed, the returned one included, then has rate ≤ α.
No monotonicity of the rate in λ is assumed.

**p-values.** Given the k certify items accepted at λ, their errors e are
Binomial(k, r(λ)), so

- ``binomial``: p = P(Binomial(k, α) ≤ e), exact for a 0/1 loss (rejecting
  when p ≤ δ is the same as the Clopper–Pearson bound being ≤ α);
- ``hoeffding-bentkus``: p = min(exp(−k·h(min(r̂, α), α)), e·P(Binomial(k, α) ≤ ⌈k·r̂⌉)),
  r̂ = e / k and h the Bernoulli KL divergence (Bates et al., 2021). Valid for
  any loss in [0, 1]; for a 0/1 loss it is never smaller than the binomial one.

:func:`threshold_grid` and :func:`start_count` are the fixed confidence grid and
start count that labelling plans test.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ..core import InvalidArgumentError
from ._risk_plan import DEFAULT_GRID_STEP, plan_and_test, plan_grid, plan_start
from ._threshold import RiskThreshold, _rate, clopper_pearson_upper, min_accepted_for

__all__ = [
    "DEFAULT_GRID_STEP",
    "DEFAULT_TOLERANCE",
    "PValue",
    "binomial_p_value",
    "hoeffding_bentkus_p_value",
    "learn_then_test_threshold",
    "start_count",
    "threshold_grid",
]

PValue = Literal["binomial", "hoeffding-bentkus"]
DEFAULT_TOLERANCE = 0.25
"""Error rate, as a share of α, the first tested grid point must be able to absorb."""


def binomial_p_value(errors: int, accepted: int, alpha: float) -> float:
    """P(Binomial(accepted, α) ≤ errors): small when the rate is credibly below α."""
    return float(stats.binom.cdf(errors, accepted, alpha))


def _kl_bernoulli(a: float, b: float) -> float:
    def term(x: float, y: float) -> float:
        return 0.0 if x == 0.0 else x * math.log(x / y)

    return term(a, b) + term(1.0 - a, 1.0 - b)


def hoeffding_bentkus_p_value(errors: int, accepted: int, alpha: float) -> float:
    """The Hoeffding–Bentkus p-value of H: rate > α after ``errors`` in ``accepted``."""
    if accepted == 0:
        return 1.0
    observed = errors / accepted
    hoeffding = math.exp(-accepted * _kl_bernoulli(min(observed, alpha), alpha))
    bentkus = math.e * float(stats.binom.cdf(math.ceil(accepted * observed), accepted, alpha))
    return min(1.0, hoeffding, bentkus)


def _hb_upper(errors: int, accepted: int, delta: float) -> float:
    """Smallest rate the Hoeffding–Bentkus test would reject at δ (bisection)."""
    low, high = errors / accepted, 1.0
    if hoeffding_bentkus_p_value(errors, accepted, high - 1e-12) > delta:
        return 1.0
    for _ in range(60):
        middle = (low + high) / 2
        if hoeffding_bentkus_p_value(errors, accepted, middle) <= delta:
            high = middle
        else:
            low = middle
    return high


def start_count(alpha: float, delta: float, n: int, tolerance: float = DEFAULT_TOLERANCE) -> int:
    """Fewest accepted items a labelling plan's fixed-grid sequence starts at.

    The fewest k ≤ ``n`` whose Clopper–Pearson bound after ⌊tolerance·α·k⌋ errors
    (at least one) is ≤ α; when no k ≤ ``n`` does, :func:`min_accepted_for` (no error).
    """
    floor = min_accepted_for(alpha, delta)
    if tolerance <= 0.0:
        return floor
    for accepted in range(floor, n + 1):
        errors = max(1, math.floor(tolerance * alpha * accepted))
        if clopper_pearson_upper(errors, accepted, delta) <= alpha:
            return accepted
    return floor


def threshold_grid(step: float = DEFAULT_GRID_STEP) -> NDArray[np.float64]:
    """A fixed confidence grid, descending: 1 − step, 1 − 2·step, …, > 0 (the bands a
    labelling plan tests; Learn-then-Test itself steps by accepted items, :func:`count_grid`).

    Raises:
        InvalidArgumentError: ``step`` not in (0, 0.5].
    """
    if not (math.isfinite(step) and 0.0 < step <= 0.5):
        raise InvalidArgumentError(f"grid step must be in (0, 0.5], got {step}", field="grid_step")
    count = math.ceil(1.0 / step) - 1
    grid = np.round(1.0 - step * np.arange(1, count + 1), 12)
    result: NDArray[np.float64] = grid[grid > 0.0]
    return result


def learn_then_test_threshold(
    confidence: ArrayLike,
    correct: ArrayLike,
    *,
    alpha: float,
    delta: float,
    p_value: PValue = "binomial",
    grid_step: float = DEFAULT_GRID_STEP,
    plan: tuple[ArrayLike, ArrayLike] | None = None,
) -> RiskThreshold:
    """The lowest planned threshold Learn-then-Test certifies at (α, δ); None when none is.

    ``plan``: confidences and 0/1 labels of items independent of these (see
    :func:`~tribunal.confidence._risk_plan.plan_and_test`); without it a seeded 30% of
    the items plan and the rest are tested. ``accepted``, ``errors`` and ``n`` count the
    tested items. ``upper_bound`` is the (1 − δ) upper bound of the p-value family used:
    the Clopper–Pearson bound for ``binomial``, the Hoeffding–Bentkus inversion otherwise.

    Raises:
        InvalidArgumentError: α or δ outside (0, 1), an unknown p-value, a bad grid step,
            or bad arrays.
    """
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    if p_value not in ("binomial", "hoeffding-bentkus"):
        raise InvalidArgumentError(
            f"unknown p-value {p_value!r}; choose binomial or hoeffding-bentkus", field="method"
        )
    method = "ltt" if p_value == "binomial" else "ltt-hb"
    test = binomial_p_value if p_value == "binomial" else hoeffding_bentkus_p_value
    planned, tested = plan_and_test(confidence, correct, plan)
    grid = plan_grid(planned, grid_step)
    first = plan_start(planned, grid, tested.n, alpha=alpha, delta=delta, test=test)
    passed: tuple[float, int, int] | None = None
    for threshold in grid[first:]:
        accepted, errors = tested.at(float(threshold))
        if test(errors, accepted, alpha) > delta:
            break
        passed = (float(threshold), accepted, errors)
    if passed is None:
        return RiskThreshold(alpha, delta, None, 0, 0, None, tested.n, method)
    threshold, accepted, errors = passed
    bound = (
        clopper_pearson_upper(errors, accepted, delta)
        if p_value == "binomial"
        else _hb_upper(errors, accepted, delta)
    )
    return RiskThreshold(alpha, delta, threshold, accepted, errors, bound, tested.n, method)
