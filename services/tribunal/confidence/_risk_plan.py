"""The plan of a risk-control test: thresholds and a start chosen on items the test never sees.

Every risk-control method here tests hypotheses H_λ: "P(wrong | confidence ≥ λ) > α"
on *certify* items. A multiple test is valid only if what it tests — which thresholds,
in which order, from where — is fixed before the certify items are read. A grid of the
certify items' own confidences, or a start picked from them, is not: the thresholds
become random and the binomial law of the errors at them no longer holds exactly.

So each method first reads a **plan** part: labelled items that the test never sees,
independent of the certify items given the calibrator — in ``tribunal calibrate`` the
decisions on the queries the calibrator was fitted on; elsewhere a seeded random share
of the items handed in (:func:`plan_and_test`). From the plan only it fixes

- the **grid**: the plan's distinct confidences, descending, thinned to one every
  ``step`` of the plan's items (:func:`plan_grid`);
- the **start**: the grid point from which the fixed sequence is predicted to certify
  the most coverage, the certify errors at each λ drawn from the beta-binomial
  predictive of the plan's errors there (:func:`plan_start`).

Given the plan, the grid and start are constants and the certify items are i.i.d., so
at each grid λ the certify errors are exactly Binomial(accepted, r(λ)) given the
accepted count: the tests that follow are exact, with no simulation to vouch for them.
Reading the plan's labels is allowed because the plan is not what the test reads.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ..core import InvalidArgumentError
from ._threshold import _inputs

__all__ = [
    "DEFAULT_GRID_STEP",
    "PLAN_SEED",
    "PLAN_SHARE",
    "Labelled",
    "max_errors_passing",
    "pass_chances",
    "plan_and_test",
    "plan_grid",
    "plan_start",
]

DEFAULT_GRID_STEP = 0.02
"""Spacing of the grid, as a share of the plan's items (at least one item)."""
PLAN_SHARE = 0.3
"""Share of the items a method sets aside as its plan when it is given no plan."""
PLAN_SEED = 0
"""Seed of that split: a permutation of positions, independent of every value."""

PValueTest = Callable[[int, int, float], float]


@dataclass(frozen=True)
class Labelled:
    """Confidences with 0/1 labels (1: right), validated."""

    confidence: NDArray[np.float64]
    correct: NDArray[np.bool_]

    @classmethod
    def of(cls, confidence: ArrayLike, correct: ArrayLike) -> Labelled:
        conf, ok = _inputs(confidence, correct)
        return cls(conf, ok)

    @property
    def n(self) -> int:
        return int(self.confidence.size)

    def at(self, threshold: float) -> tuple[int, int]:
        """(accepted, wrong among them) when accepting confidence ≥ ``threshold``."""
        accepted = self.confidence >= threshold
        return int(accepted.sum()), int((accepted & ~self.correct).sum())


def plan_and_test(
    confidence: ArrayLike,
    correct: ArrayLike,
    plan: tuple[ArrayLike, ArrayLike] | None,
    *,
    share: float = PLAN_SHARE,
    seed: int = PLAN_SEED,
) -> tuple[Labelled, Labelled]:
    """The plan part and the certify part.

    With ``plan`` given (confidences and labels of items independent of these, e.g. the
    calibrator's fit queries), every item handed in is certified on. Without it, a seeded
    random ``share`` of the items becomes the plan and the rest is certified on: the
    permutation depends on the item count only, never on a value, so the certify part is
    a random sample of the items and independent of the plan part.

    Raises:
        InvalidArgumentError: bad arrays, or ``share`` outside (0, 1).
    """
    items = Labelled.of(confidence, correct)
    if plan is not None:
        return Labelled.of(*plan), items
    if not 0.0 < share < 1.0:
        raise InvalidArgumentError(f"plan share must be in (0, 1), got {share}", field="plan")
    order = np.random.default_rng(seed).permutation(items.n)
    cut = round(share * items.n)
    head, tail = np.sort(order[:cut]), np.sort(order[cut:])
    return (
        Labelled(items.confidence[head], items.correct[head]),
        Labelled(items.confidence[tail], items.correct[tail]),
    )


def plan_grid(plan: Labelled, step: float = DEFAULT_GRID_STEP) -> NDArray[np.float64]:
    """Thresholds, descending: the plan's distinct confidences, one every ⌈step·n⌉ items.

    Raises:
        InvalidArgumentError: ``step`` not in (0, 0.5].
    """
    if not (math.isfinite(step) and 0.0 < step <= 0.5):
        raise InvalidArgumentError(f"grid step must be in (0, 0.5], got {step}", field="grid_step")
    values = np.unique(plan.confidence)[::-1]
    if not values.size:
        return values
    ascending = np.sort(plan.confidence)
    counts = plan.n - np.searchsorted(ascending, values, side="left")
    stride = max(1, math.ceil(step * plan.n))
    chosen: list[float] = []
    last = 0
    for value, count in zip(values, counts, strict=True):
        if count - last >= stride or not chosen:
            chosen.append(float(value))
            last = int(count)
    return np.asarray(chosen, dtype=np.float64)


@functools.lru_cache(maxsize=65536)
def max_errors_passing(accepted: int, alpha: float, delta: float, test: PValueTest) -> int:
    """The most errors among ``accepted`` items that ``test`` still rejects at δ (−1: none).

    A bisection: both p-values grow with the errors.
    """
    low, high = -1, accepted  # test(low) passes (or low = −1); find the last that does
    if test(0, accepted, alpha) > delta:
        return -1
    low = 0
    while low < high:
        middle = (low + high + 1) // 2
        if test(middle, accepted, alpha) <= delta:
            low = middle
        else:
            high = middle - 1
    return low


def pass_chances(
    plan: Labelled,
    grid: NDArray[np.float64],
    certify_items: int,
    *,
    alpha: float,
    delta: float,
    test: PValueTest,
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per grid λ: the plan's coverage, and the predicted chance the certify part passes.

    At λ the plan accepts a items with e errors; the certify part would accept about
    m = a / n_plan · ``certify_items`` and passes when its errors stay within
    :func:`max_errors_passing` (m). Its rate is unknown, so its errors are drawn from the
    beta-binomial predictive of the plan's (Jeffreys prior: Beta(e + ½, a − e + ½)),
    which charges a small plan for its uncertainty.
    """
    coverage = np.zeros(grid.size)
    chance = np.zeros(grid.size)
    for index, threshold in enumerate(grid):
        accepted, errors = plan.at(float(threshold))
        coverage[index] = accepted / plan.n if plan.n else 0.0
        expected = round(coverage[index] * certify_items)
        if expected < 1:
            continue
        allowed = max_errors_passing(expected, alpha, delta, test)
        if allowed >= 0:
            chance[index] = float(
                stats.betabinom.cdf(allowed, expected, errors + 0.5, accepted - errors + 0.5)
            )
    return coverage, chance


def plan_start(
    plan: Labelled,
    grid: NDArray[np.float64],
    certify_items: int,
    *,
    alpha: float,
    delta: float,
    test: PValueTest,
) -> int:
    """Index into ``grid`` where the fixed sequence starts: the most expected certified
    coverage, as the plan predicts it.

    From a start s the sequence passes s, s + 1, … until its first failure and keeps the
    coverage of the last pass. With P_i the predicted chance of passing grid point i
    (:func:`pass_chances`), passing s … j is taken as min(P_s … P_j) (the tests share
    their items, so they pass or fail together), and the expected coverage from s is
    Σ_j c_j · (m_j − m_{j+1}), m_j = min(P_s … P_j), c_j the plan's coverage at j.
    A start above the region that passes wastes nothing but risks a failure on few items;
    one below it gives up what passing on the way would have kept. The first of equal
    scores (the most conservative) wins. Only the plan and the certify part's *size*
    are read.
    """
    if not grid.size or not plan.n:
        return 0
    coverage, chance = pass_chances(plan, grid, certify_items, alpha=alpha, delta=delta, test=test)
    best, best_score = 0, -1.0
    for start in range(grid.size):
        reach = np.minimum.accumulate(chance[start:])
        drop = reach - np.append(reach[1:], 0.0)
        score = float((coverage[start:] * drop).sum())
        if score > best_score + 1e-12:
            best, best_score = start, score
    return best
