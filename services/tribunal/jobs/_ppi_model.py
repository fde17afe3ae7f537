"""The label model behind the estimator: calibrated predictions of the holes' labels
fitted on reviewed holes, the design of the reviewed sample, and cross-fitting.

See :mod:`._ppi` for the estimator these serve and why.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._ppi_pool import (
    Floats,
    MetricSpec,
    RunPool,
    metric_linearisation,
    numerator_weights,
)
from ._ppi_remainder import LabelDraws, draw_labels, expected_remainder
from ._ppi_types import HumanSample, PoolLabels

__all__ = [
    "FOLDS",
    "Design",
    "Fold",
    "LabelModel",
    "Subsample",
    "cross_fitted",
    "fold_fits",
    "label_model",
    "model_bins",
    "rank_buckets",
]

MAX_BINS = 5
"""Judge-score bins of the calibrated predictions (fewer while the sample is small)."""
LABELS_PER_BIN = 40
"""Reviewed labels per bin before another bin is used."""


class Design:
    """The reviewed part of a sample, stratum by stratum."""

    def __init__(self, labels: PoolLabels, sample: HumanSample) -> None:
        self.reviewed = sample.drawn & (labels.human >= 0) & labels.holes
        self.stratum = sample.stratum
        self.sizes = sample.sizes.astype(np.float64)
        self.counts = np.bincount(self.stratum[self.reviewed], minlength=len(self.sizes)).astype(
            np.float64
        )
        self.index = np.flatnonzero(self.reviewed)
        self.strata = self.stratum[self.index]
        # Each reviewed hole stands for N_h / m_h holes of its stratum.
        self.weights = self.sizes[self.strata] / self.counts[self.strata]
        self.query_of = labels.query_of[self.index]
        self.queries = int(labels.query_of.max()) + 1

    @property
    def ready(self) -> bool:
        return bool(np.all((self.counts >= 2) | (self.sizes == 0)))

    def folds(self, wanted: int, seed: int = 0) -> NDArray[np.intp]:
        """A fold (0 .. k − 1) for each reviewed hole: a random split within each stratum,
        k ≤ ``wanted`` so that every stratum has a hole in every fold."""
        present = self.counts[self.counts > 0]
        k = int(max(1, min(wanted, present.min() if len(present) else 1)))
        rng = np.random.default_rng(seed)
        fold = np.zeros(len(self.index), dtype=np.intp)
        for h in range(len(self.sizes)):
            members = np.flatnonzero(self.strata == h)
            fold[rng.permutation(members)] = np.arange(len(members)) % k
        return fold

    def total_and_variance(self, d: Floats) -> tuple[float, float]:
        """HT total of ``d`` (one value per reviewed hole) and its stratified-SRSWOR
        variance."""
        total = float(np.sum(self.weights * d))
        variance = 0.0
        for h in range(len(self.sizes)):
            in_h = d[self.strata == h]
            m, n_h = len(in_h), self.sizes[h]
            if m >= 2:
                variance += n_h**2 * (1.0 - m / n_h) * float(np.var(in_h, ddof=1)) / m
        return total, variance

    def query_spread(self, d: Floats) -> tuple[float, int]:
        """The rectifier's standard error with queries as the units, and its degrees of
        freedom Q − 1: R_q = Σ_{i ∈ q} w_i d_i per query (each query's share of the
        correction), v = (1 − f) Q/(Q − 1) Σ_q (R_q − R̄)².

        The pair-level variance is the design's, but it rests on the residuals of ~12
        reviews per query while every metric is a per-query ratio: one query's reviews
        move its ratio together. The spread of the per-query corrections also holds the
        spread of their expectations (how far the model is off per query), so it is an
        upper estimate — the interval takes the wider of the two. f: the smallest
        stratum's sampling fraction (0 width once every hole is reviewed)."""
        queries = np.unique(self.query_of)
        if len(queries) < 2:
            return 0.0, 0
        totals = np.bincount(self.query_of, weights=self.weights * d, minlength=self.queries)
        # Queries without a review still count: their share of the correction is 0.
        q = self.queries
        present = self.sizes > 0
        fraction = (
            float(np.min(self.counts[present] / self.sizes[present])) if present.any() else 1.0
        )
        variance = (1.0 - fraction) * q / (q - 1) * float(np.sum((totals - totals.mean()) ** 2))
        return float(np.sqrt(max(variance, 0.0))), q - 1

    def degrees_of_freedom(self, d: Floats) -> float:
        """Satterthwaite's degrees of freedom of the variance of ``d``'s total, each
        reviewed hole's squared deviation a component: (Σ c_i)² / Σ c_i², c_i =
        N_h² (1 − f_h) (d_i − d̄_h)² / (m_h (m_h − 1)).

        A few holes with large residuals — a relevant document in a query with few of
        them moves its recall or nDCG far — leave the variance resting on those few, and
        the interval takes Student's t with so few degrees of freedom (m/3 for normal
        residuals; about the number of dominant holes otherwise)."""
        components = np.zeros(len(d))
        for h in range(len(self.sizes)):
            in_h = self.strata == h
            m, n_h = int(in_h.sum()), self.sizes[h]
            if m >= 2:
                deviation = d[in_h] - d[in_h].mean()
                components[in_h] = n_h**2 * (1.0 - m / n_h) * deviation**2 / (m * (m - 1))
        squares = float(np.sum(components**2))
        if squares <= 0.0:
            return float(max(len(d) - 1, 1))
        return float(np.clip(np.sum(components) ** 2 / squares, 1.0, max(len(d) - 1, 1)))


@dataclass(frozen=True)
class Subsample:
    """Reviewed holes a model is fitted on, with their design weights."""

    index: NDArray[np.intp]
    weights: Floats


@dataclass(frozen=True)
class LabelModel:
    """Predicted labels of every pair (known and reviewed pairs: their own) and, per
    query, the variance of its shift left after shrinkage (queries × G)."""

    point: Floats
    """Where the metric is linearised: known and reviewed pairs their labels, the other
    holes their calibrated prediction shifted by their query's estimated judge error."""
    calibrated: Floats
    """Every hole's calibrated prediction (no query shift; reviewed holes too)."""
    parameters: int
    """Means fitted for the calibrated predictions (the residuals' lost degrees of
    freedom)."""
    draws: LabelDraws | None = None
    """Draws of the unreviewed holes' labels under the model, for the expected remainder
    of the ratio metrics' linearisation (:mod:`._ppi_remainder`)."""

    def counts(self, pool: RunPool) -> Floats:
        """Per-query counts C_t at the point (shared by every run and metric)."""
        cached = self._cache.get("counts")
        if cached is None:
            cached = (None, pool.query_sums(self.point))
            self._cache["counts"] = cached
        return cached[1]

    def shift_in(self, pool: RunPool, frame: NDArray[np.bool_]) -> tuple[Floats, Floats]:
        """calibrated − point on the rows of ``frame`` (0 elsewhere) and its per-query
        sums, computed once per frame: every run and metric uses them."""
        cached = self._cache.get(id(frame))
        if cached is None or cached[0] is not frame:
            delta = np.where(frame[:, None], self.calibrated - self.point, 0.0)
            cached = (frame, delta, pool.query_sums(delta))
            self._cache[id(frame)] = cached
        return cached[1], cached[2]

    _cache: dict[object, Any] = field(default_factory=dict, compare=False, repr=False)


RANK_BUCKETS = (10, 30)
"""Best rank of a pair over the runs, in buckets (1–10, 11–30, 31+): the runs' own ranking
says much about relevance that a judge's score alone misses."""
MIN_PER_CELL = 8
"""Reviewed holes a (judge bin, rank bucket) cell needs to get its own mean."""


def rank_buckets(pool: RunPool) -> NDArray[np.intp]:
    """Each pair's bucket of its best rank over the runs (0: top 10, 1: 11–30, 2: deeper
    or unranked)."""
    ranks = np.stack([np.where(r > 0, r, np.iinfo(np.int32).max) for r in pool.ranks.values()])
    buckets: NDArray[np.intp] = np.searchsorted(
        np.array(RANK_BUCKETS), ranks.min(axis=0), side="left"
    ).astype(np.intp)
    return buckets


def label_model(
    labels: PoolLabels,
    design: Subsample,
    truth: Floats,
    *,
    bins: int,
    buckets: NDArray[np.intp] | None = None,
) -> LabelModel:
    """Holes: the weighted mean of the reviewed labels in their cell — judge-score bin ×
    best-rank bucket (post-stratification on the judge's P and the runs' ranks; a cell
    with few reviews takes its judge bin's mean) — shifted per query
    (:func:`_query_shifts`)."""
    predicted = truth.copy()
    holes = np.flatnonzero(labels.holes)
    p = labels.judge_p[holes]
    judged = ~np.isnan(p)
    edges = (
        np.quantile(p[judged], np.linspace(0.0, 1.0, bins + 1)[1:-1])
        if bins > 1 and judged.any()
        else np.array([])
    )
    # Holes the judge did not label form a bin of their own (their rank bucket still
    # tells them apart).
    hole_bin = np.where(judged, np.searchsorted(edges, np.nan_to_num(p), side="right"), bins)
    bins += 1
    levels = len(RANK_BUCKETS) + 1
    hole_bucket = buckets[holes] if buckets is not None else np.zeros(len(holes), np.intp)
    position = np.full(labels.known.shape, -1, dtype=np.intp)
    position[holes] = np.arange(len(holes))
    sample_bin = hole_bin[position[design.index]]
    sample_cell = sample_bin * levels + hole_bucket[position[design.index]]
    sample_z = truth[design.index]
    w = design.weights
    overall = np.average(sample_z, axis=0, weights=w)
    means = np.tile(overall, (bins * levels, 1))
    source = np.full(bins * levels, -1)  # which fitted mean each cell uses
    for b in range(bins):
        mine = sample_bin == b
        bin_mean = np.average(sample_z[mine], axis=0, weights=w[mine]) if mine.any() else overall
        for r in range(levels):
            cell = sample_cell == b * levels + r
            enough = int(cell.sum()) >= MIN_PER_CELL
            means[b * levels + r] = (
                np.average(sample_z[cell], axis=0, weights=w[cell]) if enough else bin_mean
            )
            source[b * levels + r] = b * levels + r if enough else -2 - b if mine.any() else -1
    predicted[holes] = means[hole_bin * levels + hole_bucket]
    calibrated = predicted.copy()
    shift = query_shifts(labels, design, truth - predicted)
    predicted[holes] += shift[labels.query_of[holes]]
    # Predicted labels stay labels: in [0, 1] and cumulative (z[t] ≥ z[t + 1]).
    predicted[holes] = np.minimum.accumulate(np.clip(predicted[holes], 0.0, 1.0), axis=1)
    predicted[design.index] = truth[design.index]
    parameters = len(np.unique(source[sample_cell]))
    unreviewed = labels.holes.copy()
    unreviewed[design.index] = False
    draws = draw_labels(
        labels.query_of,
        unreviewed,
        predicted,
        reviewed=design.index,
        weights=design.weights,
        residual=truth - calibrated,
    )
    return LabelModel(predicted, calibrated, parameters, draws)


def query_shifts(labels: PoolLabels, design: Subsample, residual: Floats) -> Floats:
    """Per query and grade: the weighted mean residual of its reviewed holes, shrunk
    toward 0 by empirical Bayes (κ_q = τ² / (τ² + σ²/m_q), τ² the between-query variance
    of the true shifts by the method of moments). The judge's errors cluster by query:
    without the shift every query's totals would be off by its own judge error, and the
    linearisation's remainder grows with the square of that error."""
    queries = int(labels.query_of.max()) + 1
    shift = np.zeros((queries, residual.shape[1]))
    q = labels.query_of[design.index]
    count = np.bincount(q, minlength=queries).astype(np.float64)
    has = count >= 2
    if has.sum() < 3:
        return shift
    w = design.weights
    wsum = np.bincount(q, weights=w, minlength=queries)
    for t in range(residual.shape[1]):
        r = residual[design.index, t]
        mean = np.divide(
            np.bincount(q, weights=w * r, minlength=queries),
            wsum,
            out=np.zeros(queries),
            where=wsum > 0,
        )
        noise = float(np.var(r, ddof=1)) / np.maximum(count, 1.0)
        tau2 = max(0.0, float(np.var(mean[has], ddof=1) - np.mean(noise[has])))
        kappa = np.where(has, tau2 / (tau2 + noise + 1e-300), 0.0)
        shift[:, t] = kappa * mean
    return shift


def model_bins(reviewed: int, folds: int) -> int:
    """Judge-score bins for a model fitted on the other folds' share of ``reviewed``."""
    fitted = reviewed * (folds - 1) // folds if folds > 1 else reviewed
    return int(np.clip(fitted // LABELS_PER_BIN, 1, MAX_BINS))


FOLDS = 1
"""Cross-fitting folds (1: none). With k > 1 the model that sets the linearisation point
and the predictions is fitted on the other folds' reviews, so that it never sees the
residuals it corrects; in simulations (tests, the lab) one fold covered as well or better
for nDCG — the per-query shifts need every review — and costs a k-th of the work."""


@dataclass(frozen=True)
class Fold:
    """One fold of the cross-fit: the model's fitting sample (the other folds), this
    fold's reviewed holes (a mask over the design's index), the holes each of them stands
    for (N'_h / m_{h,f}), and the holes this fold corrects (all but the fitting sample)."""

    fit: Subsample
    members: NDArray[np.bool_]
    weight: Floats
    corrected: NDArray[np.bool_]


def fold_fits(design: Design, labels: PoolLabels, wanted: int) -> list[Fold]:
    """The folds of the reviewed sample (one, fitted on the whole sample, when a stratum
    has a single review: too few to split)."""
    fold = design.folds(wanted)
    k = int(fold.max()) + 1
    if k == 1:
        everything = np.ones(len(design.index), dtype=bool)
        return [
            Fold(Subsample(design.index, design.weights), everything, design.weights, labels.holes)
        ]
    folds = []
    for f in range(k):
        rest = fold != f
        counts = np.bincount(design.strata[rest], minlength=len(design.sizes))
        fit = Subsample(
            design.index[rest], design.sizes[design.strata[rest]] / counts[design.strata[rest]]
        )
        left = design.sizes - counts
        in_fold = np.bincount(design.strata[~rest], minlength=len(design.sizes))
        weight = left[design.strata[~rest]] / in_fold[design.strata[~rest]]
        corrected = labels.holes.copy()
        corrected[fit.index] = False
        folds.append(Fold(fit, ~rest, weight, corrected))
    return folds


def cross_fitted(
    pool: RunPool,
    run: str,
    spec: MetricSpec,
    *,
    labels: PoolLabels,
    truth: Floats,
    design: Design,
    folds: list[Fold],
    models: list[LabelModel],
) -> tuple[float, Floats]:
    """The cross-fitted one-step estimate and each reviewed hole's linearised residual.

    Fold f: ``models[f]``, fitted on the other folds (:func:`label_model`), gives the
    point (their reviews as labels, every other hole its shifted prediction) and the
    calibrated predictions;
    M(point) + ∇M(point) · (T̂_f − T(point)), T̂_f the GREG totals of the holes the other
    folds leave, corrected by fold f's reviews (each standing for N'_h / m_{h,f} holes).
    The estimate is the folds' mean; the residuals d_i = ∇_i · (z_i − ẑ_i) give the
    stratified variance.
    """
    d = np.zeros(len(design.index))
    total = 0.0
    parameters = 0
    columns = truth.shape[1]
    for fold, model in zip(folds, models, strict=True):
        parameters = max(parameters, model.parameters)
        lin = metric_linearisation(
            pool,
            run,
            model.point,
            spec,
            counts=model.counts(pool),
            relevant_at=labels.relevant_at,
        )
        # The linearisation's expected remainder under the model (0 for P@k).
        if model.draws is not None:
            total += expected_remainder(
                pool,
                spec,
                lin,
                model.draws,
                model.counts(pool),
                relevant_at=labels.relevant_at,
            )
        # ∇M · (calibrated − point) over the holes this fold corrects, through the
        # per-query totals it moves (the numerator's and the counts').
        delta, delta_counts = model.shift_in(pool, fold.corrected)
        moved = float(
            np.dot(lin.numerator, lin.numerator_totals(delta, pool.query_of))
            + np.sum(lin.counts * delta_counts)
        )
        i = design.index[fold.members]
        weights = numerator_weights(pool.ranks[run][i], spec, columns, labels.relevant_at)
        gradient = lin.row_gradients(i, pool.query_of, weights)
        residual = np.einsum("ij,ij->i", gradient, truth[i] - model.calibrated[i])
        d[fold.members] = residual
        total += float(np.mean(lin.values)) + moved + float(np.sum(fold.weight * residual))
    # Residuals from p fitted means understate the spread by (m − p)/m: scale them back
    # (the usual small-sample correction of the GREG variance).
    m = len(d)
    if m > parameters + 1:
        d *= np.sqrt(m / (m - parameters))
    return total / len(folds), d
