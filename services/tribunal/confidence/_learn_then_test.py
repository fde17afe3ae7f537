"""Learn-then-Test: p-values on a coarse threshold grid, tested in fixed sequence.

Learn-then-Test (Angelopoulos, Bates, Candès, Jordan & Lei, 2021) turns risk
control into multiple testing: each threshold λ of a grid fixed *before* the
data is seen is a null hypothesis H_λ: "P(wrong | confidence ≥ λ) > α", with a
p-value from the calibration items accepted at λ. Grid points are tested from
the highest threshold down (fixed-sequence testing) and the scan stops at the
first p-value above δ; the lowest threshold rejected is returned.

**Guarantee.** If the calibration items and future traffic are exchangeable
(i.i.d. from one distribution) and the calibrator was not fitted on the
calibration items, then with probability ≥ 1 − δ over the calibration draw the
returned λ̂ satisfies P(wrong | confidence ≥ λ̂) ≤ α on future traffic (indeed
every grid threshold above it does too).

**p-values.** Given the k calibration items accepted at λ, their errors e are
Binomial(k, r(λ)), r(λ) the true hallucination rate, so

- ``binomial``: p = P(Binomial(k, α) ≤ e), exact for a 0/1 loss (rejecting
  when p ≤ δ is the same as the Clopper–Pearson bound being ≤ α);
- ``hoeffding-bentkus``: p = min(exp(−k·h(min(r̂, α), α)), e·P(Binomial(k, α) ≤ ⌈k·r̂⌉)),
  r̂ = e / k and h the Bernoulli KL divergence (Bates et al., 2021). Valid for
  any loss in [0, 1]; for a 0/1 loss it is never smaller than the binomial one.

**Where the sequence starts.** A fixed-sequence scan from the very top stops
at its first test, and its first test has the least data: with the fewest items
that *could* pass (all right), one wrong item among the most confident ends
everything. So the sequence starts at the first grid point accepting enough
items to pass even with a few errors — the fewest k whose Clopper–Pearson bound
after ⌊tolerance·α·k⌋ errors is ≤ α (tolerance 1/4: at α = 0.1, δ = 0.1, 40
items with 1 error) — or, when the calibration set is too small for that, the
fewest that could pass with none (:func:`~tribunal.confidence.min_accepted_for`).
The start depends on the count of calibration items only, never on a label, so
the sequence is still fixed before any label is read. Grid points above the
start are not tested: accepting at the start accepts them too.

**Why a coarse grid.** A scan over every distinct confidence also tests the
point just below each unlucky error; a grid of fixed confidence steps (default
0.02) is decided before any data and is tested at fewer such points.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ..core import InvalidArgumentError
from ._threshold import (
    AcceptanceCurve,
    RiskThreshold,
    _rate,
    clopper_pearson_upper,
    min_accepted_for,
)

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
DEFAULT_GRID_STEP = 0.02
"""Spacing of the default confidence grid (0.98, 0.96, …, 0.02)."""
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
    """Fewest accepted items at which the sequence starts (see the module docstring).

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
    """The fixed confidence grid, descending: 1 − step, 1 − 2·step, …, > 0.

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
    tolerance: float = DEFAULT_TOLERANCE,
) -> RiskThreshold:
    """The lowest grid threshold Learn-then-Test certifies at (α, δ); None when none is.

    ``upper_bound`` is the (1 − δ) upper bound of the p-value family used: the
    Clopper–Pearson bound for ``binomial``, the Hoeffding–Bentkus inversion otherwise.
    """
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    if p_value not in ("binomial", "hoeffding-bentkus"):
        raise InvalidArgumentError(
            f"unknown p-value {p_value!r}; choose binomial or hoeffding-bentkus", field="method"
        )
    method = "ltt" if p_value == "binomial" else "ltt-hb"
    test = binomial_p_value if p_value == "binomial" else hoeffding_bentkus_p_value
    curve = AcceptanceCurve.of(confidence, correct)
    start = start_count(alpha, delta, curve.n, tolerance)
    passed: tuple[float, int, int] | None = None
    for threshold in threshold_grid(grid_step):
        accepted, errors = curve.at(float(threshold))
        if accepted < start:
            continue
        if test(errors, accepted, alpha) > delta:
            break
        passed = (float(threshold), accepted, errors)
    if passed is None:
        return RiskThreshold(alpha, delta, None, 0, 0, None, curve.n, method)
    threshold, accepted, errors = passed
    bound = (
        clopper_pearson_upper(errors, accepted, delta)
        if p_value == "binomial"
        else _hb_upper(errors, accepted, delta)
    )
    return RiskThreshold(alpha, delta, threshold, accepted, errors, bound, curve.n, method)
