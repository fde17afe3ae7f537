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
Σ_q O((T_q − T̂_q)²) in how far the judge's per-query totals are from the truth. For
nDCG that remainder has a sign: the ideal DCG is concave in the counts, so its tangent
overstates it and nDCG comes out low; the estimate adds the remainder's expectation
under the fitted label model (:mod:`._ppi_remainder`: the label model's draws of the
unreviewed holes, with each query's error left after its reviews). A plug-in
that divides the *sample-corrected* totals instead is consistent only when every query
has many reviewed pairs (with ~12 per query its divisor's noise biases the ratio far more).
The simulation checks (tests, ``tribunal-lab eval label-evaluate``) measure the coverage
this gives.

**Calibrated predictions and the linearisation point (PPI++'s power tuning,
generalised).** ẑ_i is not the judge's raw label: the holes are grouped by the judge's P
(quantile bins, up to 5; fewer while the sample is small) and by their best rank over the
runs (1–10, 11–30, deeper: the runs' own ranking carries information the judge's score
misses), and ẑ_i is the weighted mean of the reviewed labels in i's cell — the
post-stratified (GREG) estimator of survey sampling. It reduces to the human-only
estimate (PPI with λ = 0) with one cell, and lets a weak judge only *narrow* the
interval by however much its P ranks the holes. The metric is linearised at a point
nearer the truth than ẑ: each query's predictions shifted by its reviewed residuals'
mean, shrunk by empirical Bayes (a judge's errors cluster by query) — any point leaves
the rectifier's first-order unbiasedness intact; a nearer one shrinks the remainder.
Fitting ẑ on the sample makes M̂ approximately (O(1/m)) rather than exactly unbiased;
``folds`` > 1 cross-fits instead. The variance uses the fitted residuals, as for GREG.

**The interval: the wider of two, each on Student's t.** With d_i = ∇_i M · (z_i − ẑ_i)
for each reviewed hole and w_i = N_h / m_h its weight:

- *pairs as units* (the design's variance): v_pair = Σ_h N_h² (1 − f_h) s_h² / m_h, s_h²
  the sample variance of d in stratum h (stratified SRSWOR), with Satterthwaite's
  degrees of freedom (Σ c_i)² / Σ c_i², c_i each hole's share of v_pair;
- *queries as units*: R_q = Σ_{i ∈ q} w_i d_i, v_query = (1 − f) Q/(Q − 1) Σ_q (R_q − R̄)²,
  with Q − 1 degrees of freedom.

The interval is M̂ ± max(t_{ν_pair} √v_pair, t_{Q−1} √v_query). Why both: every metric is
a per-query ratio (nDCG's ideal DCG and recall's divisor depend on the unknown labels)
and a 5% sample gives each query ~12 reviews, so the residuals are heavy-tailed (one
relevant document in a query with few of them moves its recall far) and a query's
reviews move its ratio together. The normal interval on v_pair alone covered 84–90% of
the true metrics at the nominal 90% on TREC DL 2019 (its full qrels hidden but for the
sample; nDCG@10 84–85%). Satterthwaite's
ν_pair falls to about the number of dominant residuals, widening the interval where it
rests on a few (it restored nDCG@10 and P@10); v_query also holds the spread of the
per-query corrections' expectations, so it over-states the variance — an upper estimate,
which the interval takes only where it is the wider (mostly R@100, whose v_pair fell
well short of the estimates' spread). A pairwise difference A − B uses d^A − d^B on the same sample,
so its interval is narrower than the two intervals suggest. Reviews that arrive in the
queue's (random, label-blind) order form, within each stratum, a simple random sample of
it, so the estimate is valid at every point of the review and tightens as m_h grows.

``ppi-python`` (``ppi_py.ppi_mean_ci`` and its M-estimators) gives PPI++'s interval for a
mean or an M-estimate from i.i.d. (label, prediction) pairs by a CLT over those pairs —
P@10 under a uniform sample is such a mean (of the run's top-10 slots), and the lab
evaluation reports it beside this module's. nDCG and recall are not: each is a mean over
queries of a ratio of per-query totals that depend on labels outside the sample, drawn
without replacement from a finite pool, possibly stratified. So this module extends PPI
with the design's weights, calibrated predictions, the linearised rectifier of the
per-query ratios, and the interval above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from scipy import stats

from ._ppi_model import (
    FOLDS,
    Design,
    cross_fitted,
    fold_fits,
    label_model,
    model_bins,
    rank_buckets,
)
from ._ppi_pool import METRICS, Floats, MetricSpec, RunPool, metric_values
from ._ppi_types import (
    Estimate,
    EvaluationEstimates,
    HumanSample,
    PoolLabels,
    grades_to_indicators,
)

__all__ = [
    "Estimate",
    "EvaluationEstimates",
    "HumanSample",
    "PoolLabels",
    "estimate_metrics",
    "grades_to_indicators",
    "kendall_tau",
]


def estimate_metrics(
    pool: RunPool,
    labels: PoolLabels,
    sample: HumanSample,
    *,
    metrics: Sequence[MetricSpec] = METRICS,
    alpha: float = 0.1,
    folds: int = FOLDS,
    human_only: bool = True,
) -> EvaluationEstimates:
    """Every run's metrics with (1 − α) intervals, and every pair of runs' differences.

    Human labels are ``labels.human`` on the drawn holes (those not reviewed yet are
    left out: the reviewed ones of a stratum are a simple random sample of it).
    ``folds`` > 1 cross-fits the label model (each fold's residuals corrected by a model
    fitted on the other folds): no reuse of the residuals it corrects, at the price of
    fitting on fewer labels and ``folds`` times the work. ``human_only`` False skips the
    humans-only estimates (and the labels a humans-only estimate would need).
    """
    if not 0.0 < alpha < 1.0:
        raise ValueError("alpha must be in (0, 1)")
    design = Design(labels, sample)
    grades = np.where(labels.holes, labels.human, labels.known).astype(np.int64)
    truth = grades_to_indicators(grades, labels.levels)  # exact where known or reviewed
    result = EvaluationEstimates(
        alpha=alpha,
        reviewed=len(design.index),
        drawn=int(np.sum(sample.drawn)),
        ready=design.ready and len(design.index) >= 2,
    )
    judge_z = labels.judge_indicators()
    runs = list(pool.ranks)
    for spec in metrics:
        for run in runs:
            result.judge_only[(run, spec.name)] = float(
                np.mean(metric_values(pool, run, judge_z, spec, relevant_at=labels.relevant_at))
            )
    if not result.ready:
        return result
    fits = fold_fits(design, labels, folds)
    buckets = rank_buckets(pool)
    bins = model_bins(len(design.index), len(fits))
    # One label model per fold and estimator, shared by every run and metric. Humans
    # only: one bin, no ranks — the judge and the runs play no part.
    models = {
        name: [
            label_model(
                labels,
                fold.fit,
                truth,
                bins=bins if name == "ppi" else 1,
                buckets=(buckets if name == "ppi" else None),
            )
            for fold in fits
        ]
        for name in (("ppi", "human") if human_only else ("ppi",))
    }
    for spec in metrics:
        rectifiers: dict[str, Floats] = {}
        raw: dict[str, float] = {}
        for run in runs:
            for name, fitted in models.items():
                est, d = cross_fitted(
                    pool,
                    run,
                    spec,
                    labels=labels,
                    truth=truth,
                    design=design,
                    folds=fits,
                    models=fitted,
                )
                estimate = _interval(est, d, design, alpha, bound=(0.0, 1.0))
                if name == "ppi":
                    result.ppi[(run, spec.name)] = estimate
                    rectifiers[run], raw[run] = d, est
                    continue
                result.human_only[(run, spec.name)] = estimate
                # The humans-only standard error at n labels is √(N² (1/n − 1/N) S²):
                # S² from this one, then the n at which it equals the judge-and-humans
                # one (both the wider of their two intervals, each shrinking as 1/√n).
                frame = float(design.sizes.sum())
                n = float(len(design.index))
                unit = frame**2 * (1.0 / n - 1.0 / frame) if n < frame else 0.0
                result.human_equivalent[(run, spec.name)] = _equivalent_n(
                    result.ppi[(run, spec.name)].se ** 2,
                    estimate.se**2 / unit if unit > 0 else 0.0,
                    frame,
                )
        for a_index, a in enumerate(runs):
            for b in runs[a_index + 1 :]:
                result.differences[(spec.name, a, b)] = _interval(
                    raw[a] - raw[b], rectifiers[a] - rectifiers[b], design, alpha, bound=(-1.0, 1.0)
                )
    return result


def _interval(
    value: float, d: Floats, design: Design, alpha: float, *, bound: tuple[float, float]
) -> Estimate:
    """The wider of two Student's t intervals (see the module's docstring): the pair-level
    design variance on its Satterthwaite degrees of freedom, and the between-query
    variance of the per-query rectifiers on Q − 1; clipped to the quantity's range (which
    loses no coverage). ``se`` is the wider one's standard error."""
    level = 1.0 - alpha / 2.0
    pair_se = float(np.sqrt(design.total_and_variance(d)[1]))
    pair_half = pair_se * float(stats.t.ppf(level, df=design.degrees_of_freedom(d)))
    query_se, query_df = design.query_spread(d)
    query_half = query_se * float(stats.t.ppf(level, df=query_df)) if query_df > 0 else 0.0
    se, half = (pair_se, pair_half) if pair_half >= query_half else (query_se, query_half)
    low, high = bound
    return Estimate(
        float(np.clip(value, low, high)),
        max(low, value - half),
        min(high, value + half),
        se,
    )


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
