"""Selection with guaranteed risk (SGR; Geifman & El-Yaniv, NeurIPS 2017), on a planned grid.

SGR is a binary search over thresholds: a one-sided Clopper–Pearson bound at the middle
one; a bound ≤ α moves the search to lower thresholds (more coverage), otherwise to
higher ones; the lowest threshold whose bound was ≤ α is returned.

**What keeps it valid.** The original runs the search over the calibration items' own
confidences with each test at δ / ⌈log₂ m⌉, a union bound over the ⌈log₂ m⌉ steps. That
covers fixed thresholds tested in a fixed order; a binary search chooses each next
threshold from the last outcome, among values that are themselves the data, so the
union bound over the steps alone does not cover it. Here the search runs over the
plan's grid (:mod:`._risk_plan`, at most :data:`GRID_POINTS` thresholds fixed before
the certify items are read), and each test is at δ / (grid size): a union bound over
*every* threshold the search could visit. Given the plan each is a constant and its
test exact, so P(some threshold with a rate above α passes) ≤ Σ δ / size ≤ δ, whatever
path the search takes.

**Guarantee.** If the certify items and future traffic are exchangeable (i.i.d.) and
neither the calibrator nor the plan used the certify items, then with probability
≥ 1 − δ the returned λ̂ satisfies P(wrong | confidence ≥ λ̂) ≤ its bound ≤ α on future
traffic.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ._risk_plan import plan_and_test, plan_grid
from ._threshold import RiskThreshold, _rate, clopper_pearson_upper

__all__ = ["GRID_POINTS", "METHOD", "sgr_threshold"]

METHOD = "sgr"
GRID_POINTS = 15
"""Thresholds the search may visit (a 4-step binary search): the union bound's size."""


def sgr_threshold(
    confidence: ArrayLike,
    correct: ArrayLike,
    *,
    alpha: float,
    delta: float,
    plan: tuple[ArrayLike, ArrayLike] | None = None,
) -> RiskThreshold:
    """The lowest threshold SGR certifies at (α, δ) on the planned grid; None when none is.

    ``plan``: confidences and labels of items independent of these; without it a
    seeded 30% of the items plan and the rest are tested.
    """
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    planned, tested = plan_and_test(confidence, correct, plan)
    chosen = RiskThreshold(alpha, delta, None, 0, 0, None, tested.n, METHOD)
    full = plan_grid(planned)
    if not full.size:
        return chosen
    # At most GRID_POINTS of the plan's thresholds, evenly spread over its grid.
    picks = np.unique(np.round(np.linspace(0, full.size - 1, min(GRID_POINTS, full.size))))
    grid = full[picks.astype(np.int64)]
    level = delta / grid.size
    low, high = 0, int(grid.size) - 1  # 0: the highest threshold (fewest accepted)
    best = -1
    while low <= high:
        middle = (low + high) // 2
        accepted, errors = tested.at(float(grid[middle]))
        bound = clopper_pearson_upper(errors, accepted, level) if accepted else 1.0
        if bound <= alpha:
            if middle > best:
                best = middle
                chosen = RiskThreshold(
                    alpha, delta, float(grid[middle]), accepted, errors, bound, tested.n, METHOD
                )
            low = middle + 1
        else:
            high = middle - 1
    return chosen
