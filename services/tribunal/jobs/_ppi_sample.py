"""Drawing the human sample of an evaluation: uniform, or stratified by the judge's
uncertainty (active inference).

Both designs are stratified simple random sampling without replacement with a fixed
budget of n holes, so every hole's inclusion probability n_h / N_h is known and
recorded, and :mod:`._ppi` weights each reviewed hole by its inverse.

- ``uniform``: one stratum; n of the N holes at random.
- ``uncertainty``: Zrnic & Candès (2024, "Active statistical inference") show that the
  variance of a prediction-powered estimate is smallest when hole i is sampled with
  probability ∝ the standard deviation of its rectifier, √E[(∇_i M · (z_i − ẑ_i))²].
  We score each hole by ‖∇_i M‖ · √(p_i (1 − p_i)) — its weight in the metrics (through
  its query's totals, summed over runs and metrics at the judge's labels) times the
  judge's uncertainty — cut the scores into ``strata`` quantile strata, and allocate the
  budget to stratum h ∝ N_h × its mean score (Neyman allocation), at least
  ``MIN_PER_STRATUM`` per stratum so that each has a variance. Every hole keeps a
  positive probability (a floor on the score), so the estimate stays unbiased whatever
  the judge gets wrong; a good score only narrows the interval.

The order in which the sampled holes are queued for review is a random permutation:
reviews done in that order are, within each stratum, a simple random sample of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from ._ppi import HumanSample, PoolLabels
from ._ppi_pool import METRICS, Floats, MetricSpec, RunPool, metric_gradients

__all__ = ["DESIGNS", "MIN_PER_STRATUM", "draw_sample", "uncertainty_scores"]

Design = Literal["uniform", "uncertainty"]
DESIGNS: tuple[str, ...] = ("uniform", "uncertainty")
MIN_PER_STRATUM = 2
SCORE_FLOOR = 0.1
"""A hole's score is at least this share of the mean score: no hole is left out."""


def uncertainty_scores(
    pool: RunPool, labels: PoolLabels, metrics: Sequence[MetricSpec] = METRICS
) -> Floats:
    """‖∇_i M‖ · √(p(1 − p)) per pair (0 for known pairs), floored at
    ``SCORE_FLOOR`` × the holes' mean."""
    # A hole the judge did not label is as uncertain as can be: p = 1/2.
    p = np.nan_to_num(labels.judge_p, nan=0.5)
    soft = labels.judge_indicators()
    holes = labels.holes
    # The judge's expected label where it is unsure: P for every grade up to relevant_at.
    soft[holes, : labels.relevant_at] = p[holes, None]
    soft[holes, labels.relevant_at :] = 0.0
    weight = np.zeros(pool.size)
    for spec in metrics:
        for run in pool.ranks:
            _, gradient = metric_gradients(pool, run, soft, spec, relevant_at=labels.relevant_at)
            weight += np.sum(gradient**2, axis=1)
    score = np.sqrt(weight) * np.sqrt(p * (1.0 - p))
    score = np.where(holes, score, 0.0)
    mean = float(score[holes].mean()) if holes.any() else 0.0
    return np.where(holes, np.maximum(score, SCORE_FLOOR * mean), 0.0)


def draw_sample(
    pool: RunPool,
    labels: PoolLabels,
    budget: int,
    *,
    design: Design = "uniform",
    seed: int = 0,
    strata: int = 4,
    metrics: Sequence[MetricSpec] = METRICS,
) -> tuple[HumanSample, NDArray[np.intp]]:
    """The sample and the review order (indices of the drawn pairs, queue order)."""
    holes = np.flatnonzero(labels.holes)
    if budget < MIN_PER_STRATUM:
        raise ValueError(f"a human budget of {budget} is below {MIN_PER_STRATUM}")
    if budget > len(holes):
        raise ValueError(f"a human budget of {budget} exceeds the {len(holes)} holes")
    rng = np.random.default_rng(seed)
    stratum = np.full(pool.size, -1, dtype=np.intp)
    if design == "uniform" or strata <= 1:
        stratum[holes] = 0
        allocation = np.array([budget])
    elif design == "uncertainty":
        score = uncertainty_scores(pool, labels, metrics)[holes]
        # Quantile strata by rank (ties split evenly), then Neyman allocation.
        order = np.argsort(score, kind="stable")
        groups = np.array_split(order, strata)
        for h, members in enumerate(groups):
            stratum[holes[members]] = h
        sizes = np.array([len(g) for g in groups], dtype=np.float64)
        means = np.array([score[g].mean() if len(g) else 0.0 for g in groups])
        allocation = _allocate(budget, sizes, sizes * means)
    else:
        raise ValueError(f"design {design!r} is not one of {', '.join(DESIGNS)}")
    drawn = np.zeros(pool.size, dtype=bool)
    for h, n_h in enumerate(allocation):
        members = np.flatnonzero(stratum == h)
        drawn[rng.choice(members, size=int(n_h), replace=False)] = True
    review_order = rng.permutation(np.flatnonzero(drawn))
    return HumanSample(stratum=stratum, drawn=drawn, design=design), review_order


def _allocate(budget: int, sizes: Floats, weights: Floats) -> NDArray[np.int64]:
    """Integer n_h ∝ weights, MIN_PER_STRATUM ≤ n_h ≤ N_h, Σ n_h = budget."""
    lower = np.minimum(sizes, MIN_PER_STRATUM).astype(np.int64)
    if lower.sum() > budget:
        raise ValueError(
            f"a human budget of {budget} cannot give every stratum {MIN_PER_STRATUM} labels"
        )
    allocation = lower.copy()
    left = budget - int(allocation.sum())
    while left > 0:
        room = sizes - allocation
        open_ = room > 0
        share = np.where(open_, weights, 0.0)
        if share.sum() <= 0:
            share = open_.astype(np.float64)
        ideal = left * share / share.sum()
        add = np.minimum(np.floor(ideal).astype(np.int64), room.astype(np.int64))
        if add.sum() == 0:
            # The remainder goes one by one to the open strata with the largest share.
            add = np.zeros_like(allocation)
            add[int(np.argmax(np.where(open_, ideal - np.floor(ideal) + share, -1.0)))] = 1
        allocation += add
        left = budget - int(allocation.sum())
    return allocation
