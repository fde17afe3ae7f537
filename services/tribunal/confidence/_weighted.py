"""Risk control on a sample drawn with unequal, known inclusion probabilities.

The live audits review ACCEPTs at share π_a and FALLBACKs at a smaller share π_f (and
ACCEPTs by confidence stratum), each with its inclusion probability π recorded. The
reviewed items are then **not** a uniform sample of the served traffic: certifying on
them as if they were would over-represent what was audited more. This module certifies a
threshold on them, every label used, each weighted by its inverse inclusion probability.

**The weights.** Each item carries ``weight`` u = π_floor / π ∈ (0, 1], where π_floor is
the smallest positive inclusion probability of the audit design over the traffic the
items were drawn from (a constant of the design, not of the sample). u = 1 for the
least-audited stratum.

**Why the sample is i.i.d. from a known tilt of the traffic.** Live queries x are i.i.d.
from p (the assumption of every certificate here: "traffic like this"); each is kept
with probability π(x), by a coin independent of its label. The kept ones are then i.i.d.
from q(x) ∝ π(x) p(x), and for any f, E_p[f] ∝ E_q[f / π] ∝ E_q[u f].

**The test at one threshold λ.** With A = {confidence ≥ λ} and W the event "wrong",
the rate on the traffic is r(λ) = P_p(W | A), and

    r(λ) ≥ α  ⟺  E_p[1_A (1_W − α)] ≥ 0  ⟺  E_q[X_λ] ≥ α,   X_λ = α + u · 1_A (1_W − α),

with X_λ ∈ [0, 1] because u ≤ 1. So the null H_λ "r(λ) ≥ α" is "the mean of i.i.d.
[0, 1] variables is ≥ α", tested by betting (Waudby-Smith & Ramdas, JRSS-B 2024): the
wealth K_t = Π_{i≤t} (1 + ν_i (α − X_i)), with each bet ν_i ∈ [0, c/(1 − α)], c < 1,
chosen from items before i only (predictable plug-in), is a nonnegative supermartingale
under H_λ, so by Ville's inequality P(max_t K_t ≥ 1/δ) ≤ δ: the p-value 1 / max_t K_t is
valid. The items are read in a seeded order that depends on their count only. An item
that is not accepted at λ has X = α and leaves the wealth unchanged; when every accepted
item has the same weight, the test is an (unweighted) test of the accepted items' error
rate — the case of (a) below, at the price of betting instead of an exact binomial.

**Many thresholds.** As in every method here (:mod:`._risk_plan`), the grid and the
start are fixed on the plan (the calibrator's fit queries, or a seeded share), never on
the certify items: labels, confidences or weights. The fixed sequence tests grid points
from the start downwards and stops at the first that fails; since each test is valid at
level δ and the order is fixed, P(some certified λ has r(λ) > α) ≤ δ (the fixed-sequence
argument of Learn-then-Test). Hence, with probability ≥ 1 − δ, the hallucination rate
among accepted answers, on traffic drawn like the audited one, is ≤ α at the returned λ̂.

**(a) A uniform special case.** Within the ACCEPT stratum every item was audited with
the same π_a. On the *served* calibrator's confidence scale, any threshold at or above
the served one accepts only items that were ACCEPTs, so the audited ACCEPTs are a uniform
sample of what it would accept and the plain methods apply, unweighted. A
re-certification refits the calibrator: on the new scale a former FALLBACK may be
accepted, so this does not hold there, and the weighted test above is what stays valid.
With one share for every decision (all u = 1) the plain method is used.

**Why not a library.** ``confseq`` implements these betting bounds but ships only a source
distribution whose C++ extension needs Boost and pybind11 2.6 (older than Python 3.11);
see :mod:`tribunal.audit._sequence`. The test is a few lines of numpy; its coverage is
checked on seeded synthetic stratified samples in the tests.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ..core import InvalidArgumentError
from ._learn_then_test import binomial_p_value
from ._risk_plan import (
    DEFAULT_GRID_STEP,
    PLAN_SEED,
    PLAN_SHARE,
    Labelled,
    plan_grid,
    plan_start,
)
from ._threshold import RiskThreshold, _rate

__all__ = ["METHOD", "betting_p_value", "weighted_threshold", "weights_of"]

METHOD = "ipw-betting"
"""The name recorded on a threshold certified by :func:`weighted_threshold`."""
_CAP = 0.75
"""The largest bet, as a share of the most the wealth can lose (c in the docstring)."""
_ORDER_SEED = 1
"""Seed of the order the certify items are read in (a permutation of positions only)."""


def weights_of(weight: ArrayLike, n: int) -> NDArray[np.float64]:
    """Validated weights u ∈ (0, 1], one per item.

    Raises:
        InvalidArgumentError: the wrong length, or a weight outside (0, 1].
    """
    values = np.asarray(weight, dtype=np.float64)
    if values.shape != (n,):
        raise InvalidArgumentError(
            f"{values.size} weights for {n} items: give one per item", field="weight"
        )
    if not (np.isfinite(values).all() and (values > 0).all() and (values <= 1).all()):
        raise InvalidArgumentError(
            "weights must be in (0, 1]: pi_floor / pi, the smallest inclusion probability "
            "of the design over the item's",
            field="weight",
        )
    return values


def betting_p_value(x: NDArray[np.float64], alpha: float, delta: float = 0.05) -> float:
    """p-value of "the mean of these i.i.d. [0, 1] values is ≥ α", read in the given order.

    Wealth Π (1 + ν_i (α − x_i)), ν_i predictable (the plug-in of Waudby-Smith & Ramdas,
    computed on the values before i that moved the wealth), capped at c / (1 − α): the
    p-value is 1 / the wealth's running maximum, valid by Ville's inequality.
    """
    informative = x != alpha
    if not informative.any():
        return 1.0
    values = x[informative]
    t = np.arange(1, values.size + 1, dtype=np.float64)
    # Running mean and variance of the informative values before each one (with a prior
    # of 1/2 and 1/4, as in the paper), so each bet reads only the past.
    sums = np.concatenate([[0.0], np.cumsum(values)[:-1]])
    means = (0.5 + sums) / t
    squares = np.concatenate([[0.0], np.cumsum((values - means) ** 2)[:-1]])
    variances = (0.25 + squares) / t
    # The bet's scale reads δ, a constant: any predictable choice keeps the p-value valid.
    bets = np.sqrt(2.0 * math.log(1.0 / delta) / (variances * t * np.log1p(t)))
    bets = np.minimum(bets, _CAP / (1.0 - alpha))
    # Only bet on "below α": when the past mean is above α the bet is 0.
    bets = np.where(means < alpha, bets, 0.0)
    log_wealth = np.cumsum(np.log1p(bets * (alpha - values)))
    best = float(np.max(log_wealth))
    return 1.0 if best <= 0.0 else float(min(1.0, math.exp(-best)))


def _x(
    confidence: NDArray[np.float64],
    wrong: NDArray[np.bool_],
    weight: NDArray[np.float64],
    threshold: float,
    alpha: float,
) -> NDArray[np.float64]:
    accepted = confidence >= threshold
    return alpha + weight * accepted * (wrong.astype(np.float64) - alpha)


def _upper_bound(
    confidence: NDArray[np.float64],
    wrong: NDArray[np.bool_],
    weight: NDArray[np.float64],
    threshold: float,
    delta: float,
) -> float:
    """The smallest α the test at ``threshold`` still passes at δ (by bisection): the
    weighted upper bound on the rate there, as a figure for the report."""
    low, high = 0.0, 1.0
    for _ in range(30):
        middle = (low + high) / 2
        x = _x(confidence, wrong, weight, threshold, middle)
        passes = betting_p_value(x, middle, delta) <= delta
        low, high = (low, middle) if passes else (middle, high)
    return round(high, 6)


def weighted_threshold(
    confidence: ArrayLike,
    correct: ArrayLike,
    weight: ArrayLike,
    *,
    alpha: float,
    delta: float,
    plan: tuple[ArrayLike, ArrayLike, ArrayLike] | None = None,
) -> RiskThreshold:
    """The lowest threshold the planned fixed sequence of weighted betting tests
    certifies (see the module docstring); threshold None when none is.

    ``weight``: u = π_floor / π per item. ``plan``: confidences, labels and weights of
    items independent of these (the calibrator's fit queries); without it a seeded 30% of
    the items plan and the rest are certified on.

    Raises:
        InvalidArgumentError: α or δ outside (0, 1), or bad arrays or weights.
    """
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    items = Labelled.of(confidence, correct)
    weights = weights_of(weight, items.n)
    if plan is not None:
        planned = Labelled.of(plan[0], plan[1])
        plan_weights = weights_of(plan[2], planned.n)
        tested, tested_weights = items, weights
    else:
        order = np.random.default_rng(PLAN_SEED).permutation(items.n)
        cut = round(PLAN_SHARE * items.n)
        head, tail = np.sort(order[:cut]), np.sort(order[cut:])
        planned = Labelled(items.confidence[head], items.correct[head])
        plan_weights = weights[head]
        tested = Labelled(items.confidence[tail], items.correct[tail])
        tested_weights = weights[tail]
    chosen = RiskThreshold(alpha, delta, None, 0, 0, None, tested.n, METHOD)
    grid = plan_grid(planned, DEFAULT_GRID_STEP)
    if not grid.size or not tested.n:
        return chosen
    # The start: the plan's prediction, on the certify part's size shrunk by the plan's
    # weights (Kish's effective size), since weighting costs power. Reads no certify value.
    kish = float(plan_weights.sum() ** 2 / (plan_weights**2).sum()) / planned.n if planned.n else 1
    effective = max(1, round(tested.n * kish))
    start = plan_start(planned, grid, effective, alpha=alpha, delta=delta, test=binomial_p_value)
    read = np.random.default_rng(_ORDER_SEED).permutation(tested.n)
    conf, wrong, u = tested.confidence[read], ~tested.correct[read], tested_weights[read]
    last: float | None = None
    for threshold in grid[start:]:
        if betting_p_value(_x(conf, wrong, u, float(threshold), alpha), alpha, delta) > delta:
            break
        last = float(threshold)
    if last is None:
        return chosen
    accepted = conf >= last
    return RiskThreshold(
        alpha,
        delta,
        last,
        int(accepted.sum()),
        int((accepted & wrong).sum()),
        _upper_bound(conf, wrong, u, last, delta),
        tested.n,
        METHOD,
    )
