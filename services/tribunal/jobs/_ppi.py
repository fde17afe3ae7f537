"""Retrieval metrics with confidence intervals from judge labels and a human sample.

The estimand: each run's mean over queries of nDCG@10, P@10, R@100 (:mod:`._ppi_pool`)
under the *human* labels of every pooled pair (existing qrels count as human labels;
the holes are unknown). What is observed: the judge's P(relevant) on every hole, and
human labels on a random sample of holes drawn by a recorded design (:mod:`._ppi_sample`:
stratified simple random sampling without replacement, stratum h has N_h holes of
which m_h are reviewed, so each reviewed hole stood for N_h / m_h).

**The estimator (prediction-powered, one-step).** Let ẑ_i be a prediction of hole i's
label from the judge and M(z) the metric mean over queries as a function of all labels.

    M̂ = M(ẑ) + Σ_h (N_h / m_h) Σ_{i ∈ S_h} ∇_i M(ẑ) · (z_i − ẑ_i)

The first term is the metric with judge labels in the holes; the second is the
*rectifier*: for a metric linear in the labels (P@k, DCG) it is exactly prediction-powered
inference's correction — the sample's mean of (human − judge) scaled to the pool, with
inclusion probabilities m_h / N_h (inverse-probability weights, as in active inference,
Zrnic & Candès 2024) — and M̂ is design-unbiased whatever the judge. nDCG (the ideal DCG
is a function of the pool's counts per grade) and recall (divided by the pool's number of
relevant documents) are not linear: per query the metric is a ratio of two totals that
are linear in the labels, so the rectifier uses the *linearisation* of each query's ratio
at the judge's totals (the "linearized rectifier": ∇_i M is ∂M/∂z_i, one per pair through
its query's totals). That keeps the correction linear in the sample — unbiased for the
linear part, with the design's exact variance — and leaves a second-order remainder
Σ_q O((T_q − T̂_q)²) in how far the judge's per-query totals are from the truth. A plug-in
that divides the *sample-corrected* totals instead is consistent only when every query
has many reviewed pairs (with ~12 per query its divisor's noise biases the ratio far more).
The simulation checks (tests, ``tribunal-lab eval label-evaluate``) measure the coverage
this gives.

**Calibrated predictions (PPI++'s power tuning, generalised).** ẑ_i is not the judge's
raw label: the holes are binned by the judge's P (quantiles, up to 5 bins; fewer while
the sample is small) and ẑ_i is the weighted mean of the reviewed labels in i's bin — the
post-stratified (GREG) estimator of survey sampling. It reduces to PPI with λ = 0 (the
human-only estimate) when one bin is used, and lets a weak judge only *narrow* the
interval by however much its P ranks the holes. Fitting ẑ on the sample makes M̂
approximately (O(1/m)) rather than exactly unbiased; the variance uses the fitted
residuals, as for GREG.

**The interval.** Var(M̂) = Σ_h N_h² (1 − m_h/N_h) s_h² / m_h, s_h² the sample variance of
d_i = ∇_i M · (z_i − ẑ_i) in stratum h (stratified SRSWOR; exact for the linear part);
a normal (1 − α) interval. A pairwise difference A − B uses d^A − d^B on the same sample,
so its interval is narrower than the two intervals suggest. Reviews that arrive in the
queue's (random, label-blind) order form, within each stratum, a simple random sample of
it, so the estimate is valid at every point of the review and tightens as m_h grows.

``ppi-python`` (``ppi_py.ppi_mean_ci``) computes the same interval for a mean under a
uniform i.i.d. sample; here the sample is a stratified draw without replacement from a
finite pool and the estimands are per-query ratios, so this module extends it with the
design's weights, the finite-population correction and the linearised rectifier — the
tests check that, for P@10 under a uniform sample with λ = 1, it matches ``ppi_mean_ci``
up to the finite-population correction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from ._ppi_pool import METRICS, Floats, MetricSpec, RunPool, metric_gradients, metric_values

__all__ = [
    "Estimate",
    "EvaluationEstimates",
    "HumanSample",
    "PoolLabels",
    "estimate_metrics",
    "grades_to_indicators",
]

MAX_BINS = 5
"""Judge-score bins of the calibrated predictions (fewer while the sample is small)."""
LABELS_PER_BIN = 40
"""Reviewed labels per bin before another bin is used."""


def grades_to_indicators(grades: NDArray[np.int64], levels: int) -> Floats:
    """Grades (−1: unknown → 0s) as cumulative indicators z[t] = 1{g ≥ t + 1}."""
    thresholds = np.arange(1, levels + 1)
    return (grades[:, None] >= thresholds[None, :]).astype(np.float64)


@dataclass(frozen=True)
class PoolLabels:
    """What is known of every pooled pair.

    ``known``: grade from existing qrels (−1: a hole). ``judge_p``: the judge's
    P(relevant) (NaN where ``known``); ``judge_label``: its 0/1 label. ``human``: a human
    grade of a sampled hole once reviewed (−1 otherwise). ``levels``: the highest grade;
    ``relevant_at``: the grade from which a document is relevant (P@k, R@k).
    """

    known: NDArray[np.int64]
    judge_p: Floats
    judge_label: NDArray[np.int64]
    human: NDArray[np.int64]
    query_of: NDArray[np.intp]
    levels: int = 3
    relevant_at: int = 2

    @property
    def holes(self) -> NDArray[np.bool_]:
        return self.known < 0

    def judge_indicators(self) -> Floats:
        """Judge-only labels: a relevant hole gets grade ``relevant_at``, known pairs their
        qrels grade."""
        grades = np.where(self.holes, self.judge_label * self.relevant_at, self.known)
        return grades_to_indicators(grades.astype(np.int64), self.levels)


@dataclass(frozen=True)
class HumanSample:
    """The design: every hole's stratum (−1 outside the frame: known pairs) and whether it
    was drawn; ``sizes[h]`` = N_h, holes in stratum h."""

    stratum: NDArray[np.intp]
    drawn: NDArray[np.bool_]
    design: str = "uniform"

    @property
    def sizes(self) -> NDArray[np.int64]:
        strata = self.stratum[self.stratum >= 0]
        return np.bincount(strata, minlength=int(self.stratum.max()) + 1).astype(np.int64)

    def inclusion(self) -> Floats:
        """Each hole's designed inclusion probability n_h / N_h (0 outside the frame)."""
        sizes = self.sizes
        drawn = np.bincount(
            self.stratum[self.drawn], minlength=len(sizes)
        ).astype(np.float64)
        rate = drawn / np.maximum(sizes, 1)
        return np.where(self.stratum >= 0, rate[np.maximum(self.stratum, 0)], 0.0)


@dataclass(frozen=True)
class Estimate:
    """One quantity: estimate and (1 − α) interval, with its standard error."""

    value: float
    low: float
    high: float
    se: float

    def to_json(self) -> dict[str, float]:
        return {
            "value": round(self.value, 6),
            "low": round(self.low, 6),
            "high": round(self.high, 6),
            "se": round(self.se, 6),
        }


@dataclass
class EvaluationEstimates:
    """Per (run, metric): the prediction-powered estimate, judge-only and human-only
    estimates, and the human labels a human-only estimate needs for the same width;
    per (metric, run A, run B): the difference A − B."""

    alpha: float
    reviewed: int
    drawn: int
    ready: bool
    """Every stratum has ≥ 2 reviewed holes (else the intervals are not yet defined)."""
    ppi: dict[tuple[str, str], Estimate] = field(default_factory=dict)
    human_only: dict[tuple[str, str], Estimate] = field(default_factory=dict)
    judge_only: dict[tuple[str, str], float] = field(default_factory=dict)
    human_equivalent: dict[tuple[str, str], float] = field(default_factory=dict)
    differences: dict[tuple[str, str, str], Estimate] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "reviewed": self.reviewed,
            "drawn": self.drawn,
            "ready": self.ready,
            "metrics": [
                {
                    "run": run,
                    "metric": metric,
                    "ppi": est.to_json(),
                    "judge_only": round(self.judge_only[(run, metric)], 6),
                    "human_only": self.human_only[(run, metric)].to_json(),
                    "human_labels_for_same_width": round(
                        self.human_equivalent[(run, metric)], 1
                    ),
                }
                for (run, metric), est in self.ppi.items()
            ],
            "differences": [
                {"metric": metric, "a": a, "b": b, **est.to_json()}
                for (metric, a, b), est in self.differences.items()
            ],
        }


class _Design:
    """The reviewed part of a sample, stratum by stratum."""

    def __init__(self, labels: PoolLabels, sample: HumanSample) -> None:
        self.reviewed = sample.drawn & (labels.human >= 0) & labels.holes
        self.stratum = sample.stratum
        self.sizes = sample.sizes.astype(np.float64)
        self.counts = np.bincount(
            self.stratum[self.reviewed], minlength=len(self.sizes)
        ).astype(np.float64)
        self.index = np.flatnonzero(self.reviewed)
        self.strata = self.stratum[self.index]
        # Each reviewed hole stands for N_h / m_h holes of its stratum.
        self.weights = self.sizes[self.strata] / self.counts[self.strata]

    @property
    def ready(self) -> bool:
        return bool(np.all((self.counts >= 2) | (self.sizes == 0)))

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


@dataclass(frozen=True)
class _LabelModel:
    """Predicted labels of every pair (known and reviewed pairs: their own) and, per
    query, the variance of its shift left after shrinkage (queries × G)."""

    point: Floats
    """Where the metric is linearised: known and reviewed pairs their labels, the other
    holes their calibrated prediction shifted by their query's estimated judge error."""
    calibrated: Floats
    """Every hole's calibrated prediction (no query shift; reviewed holes too)."""


def _label_model(
    labels: PoolLabels, design: _Design, truth: Floats, *, bins: int
) -> _LabelModel:
    """Holes: the weighted mean of the reviewed labels in their judge-score bin
    (post-stratification on the judge's P), shifted per query (:func:`_query_shifts`)."""
    predicted = truth.copy()
    holes = np.flatnonzero(labels.holes)
    p = labels.judge_p[holes]
    edges = np.quantile(p, np.linspace(0.0, 1.0, bins + 1)[1:-1]) if bins > 1 else np.array([])
    hole_bin = np.searchsorted(edges, p, side="right")
    position = np.full(labels.known.shape, -1, dtype=np.intp)
    position[holes] = np.arange(len(holes))
    sample_bin = hole_bin[position[design.index]]
    sample_z = truth[design.index]
    overall = np.average(sample_z, axis=0, weights=design.weights)
    means = np.tile(overall, (bins, 1))
    for b in range(bins):
        mine = sample_bin == b
        if design.weights[mine].sum() > 0:
            means[b] = np.average(sample_z[mine], axis=0, weights=design.weights[mine])
    predicted[holes] = means[hole_bin]
    calibrated = predicted.copy()
    shift = _query_shifts(labels, design, truth - predicted)
    predicted[holes] += shift[labels.query_of[holes]]
    # Predicted labels stay labels: in [0, 1] and cumulative (z[t] ≥ z[t + 1]).
    predicted[holes] = np.minimum.accumulate(np.clip(predicted[holes], 0.0, 1.0), axis=1)
    predicted[design.index] = truth[design.index]
    return _LabelModel(predicted, calibrated)


def _query_shifts(labels: PoolLabels, design: _Design, residual: Floats) -> Floats:
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


def _bins(reviewed: int) -> int:
    return int(np.clip(reviewed // LABELS_PER_BIN, 1, MAX_BINS))


def estimate_metrics(
    pool: RunPool,
    labels: PoolLabels,
    sample: HumanSample,
    *,
    metrics: Sequence[MetricSpec] = METRICS,
    alpha: float = 0.1,
) -> EvaluationEstimates:
    """Every run's metrics with (1 − α) intervals, and every pair of runs' differences.

    Human labels are ``labels.human`` on the drawn holes (those not reviewed yet are
    left out: the reviewed ones of a stratum are a simple random sample of it).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    design = _Design(labels, sample)
    grades = np.where(labels.holes, labels.human, labels.known).astype(np.int64)
    truth = grades_to_indicators(grades, labels.levels)  # exact where known or reviewed
    result = EvaluationEstimates(
        alpha=alpha,
        reviewed=len(design.index),
        drawn=int(np.sum(sample.drawn)),
        ready=design.ready and len(design.index) >= 2,
    )
    judge_z = labels.judge_indicators()
    z = float(stats.norm.ppf(1.0 - alpha / 2.0))
    runs = list(pool.ranks)
    frame = float(design.sizes.sum())
    for spec in metrics:
        for run in runs:
            result.judge_only[(run, spec.name)] = float(
                np.mean(metric_values(pool, run, judge_z, spec, relevant_at=labels.relevant_at))
            )
    if not result.ready:
        return result
    models = {
        "ppi": _label_model(labels, design, truth, bins=_bins(len(design.index))),
        "human": _label_model(labels, design, truth, bins=1),
    }
    i = design.index
    unreviewed = labels.holes.copy()
    unreviewed[i] = False
    for spec in metrics:
        rectifiers: dict[str, Floats] = {}
        raw: dict[str, float] = {}
        for run in runs:
            for name, model in models.items():
                values, gradient = metric_gradients(
                    pool, run, model.point, spec, relevant_at=labels.relevant_at
                )
                # M(point) + ∇M(point) · (T̂ − T(point)), T̂ the calibrated (GREG) totals:
                # the unreviewed holes at their calibrated prediction, and the reviewed
                # holes' residuals extended to the N_h / m_h − 1 holes each stands for.
                moved = np.sum(gradient[unreviewed] * model.calibrated[unreviewed], axis=1)
                moved -= np.sum(gradient[unreviewed] * model.point[unreviewed], axis=1)
                d = np.sum(gradient[i] * (truth[i] - model.calibrated[i]), axis=1)
                total, variance = design.total_and_variance(d)
                est = float(np.mean(values)) + float(np.sum(moved)) + total - float(np.sum(d))
                se = float(np.sqrt(variance))
                # Every metric lies in [0, 1]: clipping the interval loses no coverage.
                estimate = Estimate(
                    float(np.clip(est, 0.0, 1.0)),
                    max(0.0, est - z * se),
                    min(1.0, est + z * se),
                    se,
                )
                if name == "ppi":
                    result.ppi[(run, spec.name)] = estimate
                    rectifiers[run], raw[run] = d, est
                else:
                    result.human_only[(run, spec.name)] = estimate
                    # Population variance of the human-only linearised values, estimated
                    # with the design's weights: its width at n uniform labels is
                    # z √(N² (1/n − 1/N) S²).
                    s2 = _weighted_variance(d, design.weights)
                    ppi_var = result.ppi[(run, spec.name)].se ** 2
                    result.human_equivalent[(run, spec.name)] = _equivalent_n(
                        ppi_var, s2, frame
                    )
        for a_index, a in enumerate(runs):
            for b in runs[a_index + 1 :]:
                _, variance = design.total_and_variance(rectifiers[a] - rectifiers[b])
                diff = raw[a] - raw[b]
                se = float(np.sqrt(variance))
                result.differences[(spec.name, a, b)] = Estimate(
                    diff, max(-1.0, diff - z * se), min(1.0, diff + z * se), se
                )
    return result


def _weighted_variance(values: Floats, weights: Floats) -> float:
    if len(values) < 2:
        return 0.0
    mean = np.average(values, weights=weights)
    n = len(values)
    return float(np.average((values - mean) ** 2, weights=weights) * n / (n - 1))


def _equivalent_n(variance: float, s2: float, frame: float) -> float:
    """Uniform human labels n with N² (1/n − 1/N) S² = ``variance`` (capped at N)."""
    if s2 <= 0 or frame <= 0:
        return 0.0
    if variance <= 0:
        return frame
    return float(min(frame, 1.0 / (variance / (frame**2 * s2) + 1.0 / frame)))


def kendall_tau(a: Mapping[str, float], b: Mapping[str, float]) -> float:
    """Kendall's τ-b between two scorings of the same runs (1: same order)."""
    names = sorted(a)
    if len(names) < 2:
        return 1.0
    tau = stats.kendalltau([a[n] for n in names], [b[n] for n in names]).statistic
    return float(tau) if np.isfinite(tau) else 0.0
