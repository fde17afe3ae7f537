"""Band selection for label plans: which calibrated band certifies error ≤ ε at δ.

A band labels RELEVANT at calibrated P ≥ ``high``, IRRELEVANT at P ≤ ``low``, and
leaves the rest to humans. Two families, each tested so that the chance of certifying
any band whose error exceeds ε is at most δ:

- **nested** bands around P = 0.5: an item is labelled automatically when its certainty
  max(P, 1 − P) is ≥ λ. With ``clusters="none"`` the confidence service's
  :func:`~tribunal.confidence.select_threshold` picks λ (any of its methods: items are
  the units). With ``clusters="query"`` (``ltt`` and ``ltt-hb`` only) the same
  Learn-then-Test scan — the confidence service's fixed 0.02 grid, its start count and
  its p-values, from the widest band down, stopping at the first failure — also requires
  each band to pass a query-level test: the ratio estimate of the error rate plus a
  one-sided Student-t quantile (m − 1 degrees of freedom, m certification queries) times
  its cluster-robust standard error must be ≤ ε. Each band then passes only when both
  tests do, so the scan is valid whenever either model holds — exchangeable items, or
  (approximately, for many queries) exchangeable queries — and it keeps the items of
  one query from counting as independent evidence.
- **grid**: every (low, high) pair of a fixed 0.05 grid, each tested with the
  confidence service's binomial p-value at δ / (number of pairs) (Bonferroni); the
  certified pair with the most automatic labels is kept (items are the units).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ..confidence import (
    binomial_p_value,
    clopper_pearson_upper,
    hoeffding_bentkus_p_value,
    select_threshold,
    start_count,
    threshold_grid,
)
from ..core import InvalidArgumentError

__all__ = [
    "GRID_STEP",
    "BandOutcome",
    "Selection",
    "apply_band",
    "band_outcome",
    "query_bound",
    "select_grid",
    "select_nested",
]

GRID_STEP = 0.05
"""Spacing of the ``grid`` scheme's calibrated thresholds (0.05, 0.10, …, 0.95)."""


@dataclass(frozen=True)
class BandOutcome:
    """What a band does to labelled items."""

    items: int
    auto_labelled: int
    errors: int
    """Automatic labels that differ from the gold ones."""

    @property
    def human_share(self) -> float:
        return 1.0 - self.auto_labelled / self.items if self.items else 0.0

    @property
    def error(self) -> float | None:
        return self.errors / self.auto_labelled if self.auto_labelled else None


def apply_band(scores: ArrayLike, relevant_at: float, irrelevant_at: float) -> NDArray[np.int64]:
    """Per item: 1 RELEVANT, 0 IRRELEVANT, -1 humans — the label job's rule on judge P."""
    p = np.asarray(scores, dtype=np.float64)
    out = np.full(p.shape, -1, dtype=np.int64)
    out[p <= irrelevant_at] = 0
    out[p >= relevant_at] = 1  # as the pipeline: the upper threshold is checked first
    return out


def band_outcome(
    scores: ArrayLike, gold: ArrayLike, relevant_at: float, irrelevant_at: float
) -> BandOutcome:
    labels = apply_band(scores, relevant_at, irrelevant_at)
    y = np.asarray(gold)
    auto = labels >= 0
    return BandOutcome(int(y.size), int(auto.sum()), int((labels[auto] != y[auto]).sum()))


@dataclass(frozen=True)
class Selection:
    """A certified band (calibrated thresholds) or none, and how it was certified."""

    low: float | None
    high: float | None
    family: int
    """Bands in the tested family."""
    upper_bound: float | None
    """(1 − δ) upper bound on the error rate at the chosen band (the larger of the item
    and query bounds when both were tested)."""


def query_bound(
    errors: NDArray[np.int64],
    auto: NDArray[np.int64],
    delta: float,
    future_queries: int | None = None,
) -> float:
    """Upper (1 − δ) prediction bound on the error rate of the automatic labels of
    ``future_queries`` new queries (default: as many as given), from per-query counts.

    The smallest rate r that a one-sided query-level score test accepts:
    r · Σ auto − Σ errors ≥ t · sqrt(m / (m − 1) · Σ_q (errors_q − r · auto_q)² · (1 + m /
    future_queries)), t the Student-t (1 − δ) quantile with m − 1 degrees of freedom. The
    variance is taken at r itself (not at the observed rate), so a sample whose automatic
    labels happen to be all right still gets a bound that shrinks only with the number
    and size of its queries. 1.0 when fewer than two queries are given, nothing is
    labelled, or no rate ≤ 1 passes."""
    m, total = auto.size, int(auto.sum())
    if m < 2 or total == 0:
        return 1.0
    future = m if future_queries is None else future_queries
    e, a = errors.astype(np.float64), auto.astype(np.float64)
    rates = np.linspace(0.0, 1.0, 10_001)
    # Σ (e_q − r a_q)² for every candidate r at once.
    spread = (e @ e) - 2 * rates * (e @ a) + rates**2 * (a @ a)
    scale = stats.t.ppf(1.0 - delta, m - 1) * np.sqrt(
        np.maximum(spread, 0.0) * m / (m - 1) * (1.0 + m / future)
    )
    passing = np.flatnonzero(rates * total - e.sum() >= scale)
    return float(rates[passing[0]]) if passing.size else 1.0


def _per_query(
    accepted: NDArray[np.bool_],
    wrong: NDArray[np.bool_],
    query_index: NDArray[np.int64],
    queries: int,
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    auto = np.bincount(query_index[accepted], minlength=queries).astype(np.int64)
    errors = np.bincount(query_index[accepted & wrong], minlength=queries).astype(np.int64)
    return errors, auto


def select_nested(
    calibrated: NDArray[np.float64],
    gold: NDArray[np.int64],
    queries: NDArray[np.str_],
    *,
    epsilon: float,
    delta: float,
    method: str,
    clusters: str,
) -> Selection:
    """The narrowest nested band certified at (ε, δ) (see the module docstring)."""
    certainty = np.maximum(calibrated, 1.0 - calibrated)
    wrong = gold != (calibrated >= 0.5)
    if clusters == "none":
        chosen = select_threshold(
            certainty, (~wrong).astype(np.int64), alpha=epsilon, delta=delta, method=method
        )
        family = (
            int((threshold_grid() >= 0.5).sum())
            if method in ("ltt", "ltt-hb")
            else max(1, int(np.unique(certainty).size))
        )
        if chosen.threshold is None:
            return Selection(None, None, family, None)
        high = max(0.5, float(chosen.threshold))
        return Selection(1.0 - high, high, family, chosen.upper_bound)
    if method not in ("ltt", "ltt-hb"):
        raise InvalidArgumentError(
            f"the query-level test runs in the Learn-then-Test scan (ltt, ltt-hb); with "
            f"{method} pass --clusters none",
            field="method",
        )
    p_value = binomial_p_value if method == "ltt" else hoeffding_bentkus_p_value
    names, query_index = np.unique(queries, return_inverse=True)
    # The grid's points below 0.5 accept every item, as 0.5 does: 0.5 ends the scan.
    grid = [float(g) for g in threshold_grid() if g > 0.5] + [0.5]
    start = start_count(epsilon, delta, int(gold.size))
    passed: tuple[float, float] | None = None
    for high in grid:
        accepted = certainty >= high
        total = int(accepted.sum())
        if total < start:
            continue
        errors = int((accepted & wrong).sum())
        if p_value(errors, total, epsilon) > delta:
            break
        by_query = query_bound(*_per_query(accepted, wrong, query_index, names.size), delta)
        if by_query > epsilon:
            break
        passed = (high, max(clopper_pearson_upper(errors, total, delta), by_query))
    if passed is None:
        return Selection(None, None, len(grid), None)
    return Selection(1.0 - passed[0], passed[0], len(grid), passed[1])


def _grid_pairs() -> list[tuple[float, float]]:
    steps = round(0.5 / GRID_STEP)
    lows = [round(GRID_STEP * k, 10) for k in range(1, steps + 1)]
    highs = [round(0.5 + GRID_STEP * k, 10) for k in range(steps)]
    return [(low, high) for low in lows for high in highs]


def select_grid(
    calibrated: NDArray[np.float64], gold: NDArray[np.int64], *, epsilon: float, delta: float
) -> Selection:
    """Bonferroni over every (low, high) pair; the certified pair with most automatic labels."""
    pairs = _grid_pairs()
    level = delta / len(pairs)
    relevant = gold == 1
    best: tuple[int, float, float, float] | None = None
    for low, high in pairs:
        upper = calibrated >= high
        lower = (calibrated <= low) & ~upper  # the upper threshold wins a tie, as in apply_band
        auto = int(upper.sum() + lower.sum())
        if auto == 0 or (best is not None and auto <= best[0]):
            continue
        errors = int((upper & ~relevant).sum() + (lower & relevant).sum())
        if binomial_p_value(errors, auto, epsilon) > level:
            continue
        best = (auto, low, high, clopper_pearson_upper(errors, auto, level))
    if best is None:
        return Selection(None, None, len(pairs), None)
    return Selection(best[1], best[2], len(pairs), best[3])
