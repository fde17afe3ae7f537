"""Learn-then-Test: binomial p-values on a label-free grid, tested in fixed sequence.

Learn-then-Test (Angelopoulos, Bates, Candès, Jordan & Lei, 2021) turns risk
control into multiple testing: each threshold λ of a sequence fixed *before any
label is read* is a null hypothesis H_λ: "P(wrong | confidence ≥ λ) > α", with a
p-value from the calibration items accepted at λ. The sequence is tested from
its most conservative threshold down (fixed-sequence testing); the scan stops at
the first p-value above δ and the lowest threshold rejected is returned.

**Guarantee.** If the calibration items and future traffic are exchangeable
(i.i.d. from one distribution) and the calibrator was not fitted on the
calibration items, then with probability ≥ 1 − δ over the calibration draw the
returned λ̂ satisfies P(wrong | confidence ≥ λ̂) ≤ α on future traffic (indeed
every tested threshold above it does too).

**p-values.** Given the k calibration items accepted at λ, their errors e are
Binomial(k, r(λ)), r(λ) the true hallucination rate, so

- ``binomial``: p = P(Binomial(k, α) ≤ e), exact for a 0/1 loss (rejecting
  when p ≤ δ is the same as the Clopper–Pearson bound being ≤ α);
- ``hoeffding-bentkus``: p = min(exp(−k·h(min(r̂, α), α)), e·P(Binomial(k, α) ≤ ⌈k·r̂⌉)),
  r̂ = e / k and h the Bernoulli KL divergence (Bates et al., 2021). Valid for
  any loss in [0, 1]; for a 0/1 loss it is never smaller than the binomial one.

**The grid: steps of accepted items, not of confidence.** The thresholds are the
confidences of the k-th most confident calibration item for k = k₀, k₀ + s,
k₀ + 2s, … (s = ``grid_step`` · n, at least 1). A grid of fixed confidence steps
(0.98, 0.96, …) is placed where the calibrator's confidences happen not to be:
when they bunch (a calibrator that puts most right answers at 0.6–0.7), one
0.02 step jumps from 40 accepted items to 110 and tests only the latter, where
a few errors already fail it. Steps of accepted items test every region the
data covers at the same resolution. The grid reads only the confidences.

**Where the sequence starts.** Starting at the very top (the fewest items that
could pass, :func:`~tribunal.confidence.min_accepted_for`) is the most
conservative start, but then one wrong answer among the 22 most confident (at
α = δ = 0.1) ends the scan with nothing certified; starting lower survives a few
errors but dies when the calibration set cannot reach that start. So the start
is the grid point the *calibrator itself* predicts most likely to pass: the
confidences are the calibrator's P(correct), so the expected number of errors
among the top k is Σ (1 − confidence); the start is the k ≥ k₀ maximising the
Poisson probability that the errors stay at or below the most the test at k
allows. It reads confidences only, never a label, so the sequence is still fixed
before any label is read; thresholds above it are not tested. ``start="top"``
starts at the most conservative point instead. On seeded simulations (the
tests) and on COVID and BANKING77 traffic (docs/confidence.md) the predicted
start certifies the most coverage; the validity simulation covers both starts.
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
    "LttStart",
    "PValue",
    "binomial_p_value",
    "count_grid",
    "hoeffding_bentkus_p_value",
    "learn_then_test_threshold",
    "predicted_start",
    "start_count",
    "threshold_grid",
]

PValue = Literal["binomial", "hoeffding-bentkus"]
LttStart = Literal["predicted", "top"]
DEFAULT_GRID_STEP = 0.02
"""Spacing of Learn-then-Test's grid, as a share of the calibration items (and of the
fixed confidence grid :func:`threshold_grid` that labelling plans test)."""
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


def _max_errors_passing(
    accepted: NDArray[np.int64], alpha: float, delta: float
) -> NDArray[np.int64]:
    """For each count k, the most errors whose binomial test still rejects (−1: none)."""
    # P(Binomial(k, α) ≤ e) ≤ δ holds up to just below the δ-quantile; fixed up exactly.
    errors = np.asarray(stats.binom.ppf(delta, accepted, alpha), dtype=np.int64)
    for _ in range(3):
        over = (errors >= 0) & (stats.binom.cdf(errors, accepted, alpha) > delta)
        errors = errors - over
    for _ in range(3):
        under = stats.binom.cdf(errors + 1, accepted, alpha) <= delta
        errors = errors + under
    return errors


def predicted_start(
    confidence: NDArray[np.float64], alpha: float, delta: float, grid: NDArray[np.int64]
) -> int:
    """Index into ``grid`` (accepted counts) where the sequence starts: the point the
    confidences, read as the calibrator's P(correct), predict most likely to pass.

    The expected errors among the k most confident items are Σ (1 − confidence); the
    chance they stay within the most the test at k allows is taken as Poisson. Reads
    no label. The first point when none can pass.
    """
    if not grid.size:
        return 0
    ordered = np.sort(np.clip(confidence, 0.0, 1.0))[::-1]
    expected = np.cumsum(1.0 - ordered)[grid - 1]
    allowed = _max_errors_passing(grid, alpha, delta)
    chance = np.where(allowed >= 0, stats.poisson.cdf(allowed, expected), -1.0)
    return int(np.argmax(chance))  # the first of equal chances: the most conservative


def count_grid(
    n: int, alpha: float, delta: float, step: float = DEFAULT_GRID_STEP
) -> NDArray[np.int64]:
    """Accepted counts Learn-then-Test tests: k₀, k₀ + s, …, ≤ ``n`` (k₀ the fewest that
    could pass, s = ⌈step·n⌉ ≥ 1); empty when ``n`` < k₀.

    Raises:
        InvalidArgumentError: ``step`` not in (0, 0.5].
    """
    if not (math.isfinite(step) and 0.0 < step <= 0.5):
        raise InvalidArgumentError(f"grid step must be in (0, 0.5], got {step}", field="grid_step")
    first = min_accepted_for(alpha, delta)
    stride = max(1, math.ceil(step * n))
    return np.arange(first, n + 1, stride, dtype=np.int64)


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
    start: LttStart = "predicted",
) -> RiskThreshold:
    """The lowest grid threshold Learn-then-Test certifies at (α, δ); None when none is.

    ``upper_bound`` is the (1 − δ) upper bound of the p-value family used: the
    Clopper–Pearson bound for ``binomial``, the Hoeffding–Bentkus inversion otherwise.

    Raises:
        InvalidArgumentError: α or δ outside (0, 1), an unknown p-value or start, a bad
            grid step, or bad arrays.
    """
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    if p_value not in ("binomial", "hoeffding-bentkus"):
        raise InvalidArgumentError(
            f"unknown p-value {p_value!r}; choose binomial or hoeffding-bentkus", field="method"
        )
    if start not in ("predicted", "top"):
        raise InvalidArgumentError(
            f"unknown start {start!r}; choose predicted or top", field="method"
        )
    method = "ltt" if p_value == "binomial" else "ltt-hb"
    test = binomial_p_value if p_value == "binomial" else hoeffding_bentkus_p_value
    curve = AcceptanceCurve.of(confidence, correct)
    conf = np.asarray(confidence, dtype=np.float64)
    grid = count_grid(curve.n, alpha, delta, grid_step)
    ordered = np.sort(conf)[::-1]
    first = 0
    if start == "predicted" and grid.size:
        first = predicted_start(conf, alpha, delta, grid)
    passed: tuple[float, int, int] | None = None
    for count in grid[first:]:
        # The k-th highest confidence; ties above it are accepted with it.
        threshold = float(ordered[int(count) - 1])
        accepted, errors = curve.at(threshold)
        if test(errors, accepted, alpha) > delta:
            break
        passed = (threshold, accepted, errors)
    if passed is None:
        return RiskThreshold(alpha, delta, None, 0, 0, None, curve.n, method)
    threshold, accepted, errors = passed
    bound = (
        clopper_pearson_upper(errors, accepted, delta)
        if p_value == "binomial"
        else _hb_upper(errors, accepted, delta)
    )
    return RiskThreshold(alpha, delta, threshold, accepted, errors, bound, curve.n, method)
