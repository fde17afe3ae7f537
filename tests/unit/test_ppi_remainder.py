"""nDCG's linearisation remainder under the label model (``_ppi_remainder``), in the
synthetic world of ``test_ppi_estimator`` (judge errors clustered by query)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from tribunal.jobs import _ppi_model
from tribunal.jobs._ppi import estimate_metrics, grades_to_indicators
from tribunal.jobs._ppi_model import Design, fold_fits, label_model, model_bins, rank_buckets
from tribunal.jobs._ppi_pool import METRICS, MetricSpec, ideal_dcg, metric_linearisation
from tribunal.jobs._ppi_remainder import expected_remainder
from tribunal.jobs._ppi_sample import draw_sample

from .test_ppi_estimator import _labels, _truth, _world


def _model(seed: int, share: float) -> tuple:
    pool, grades, p = _world(seed, queries=20, docs=60, depth=25)
    labels = _labels(pool, p)
    sample, _ = draw_sample(pool, labels, int(share * pool.size), seed=seed)
    labels = dataclasses.replace(labels, human=np.where(sample.drawn, grades, -1))
    design = Design(labels, sample)
    truth = grades_to_indicators(np.where(labels.holes, labels.human, labels.known), 3)
    [fold] = fold_fits(design, labels, 1)
    model = label_model(
        labels,
        fold.fit,
        truth,
        bins=model_bins(len(design.index), 1),
        buckets=rank_buckets(pool),
    )
    return pool, grades, labels, design, model


def test_draws_keep_grades_ordered_and_spread_counts_by_query() -> None:
    pool, grades, _, design, model = _model(0, 0.15)
    draws = model.draws
    assert draws is not None
    assert draws.labels.shape == (64, int((~design.reviewed & (grades >= 0)).sum()), 3)
    # A grade ≥ t + 1 only where grade ≥ t.
    assert not np.any(draws.labels[:, :, 1] & ~draws.labels[:, :, 0])
    assert not np.any(draws.labels[:, :, 2] & ~draws.labels[:, :, 1])
    # Reviewed pairs stay at their labels: the counts never fall below theirs.
    reviewed = grades_to_indicators(np.where(design.reviewed, grades, 0), 3)
    assert np.all(draws.counts >= pool.query_sums(reviewed)[None] - 1e-9)
    point = model.counts(pool)
    mean = draws.counts.mean(axis=0)
    variance = draws.counts.var(axis=0)
    bernoulli = pool.query_sums(
        np.where(design.reviewed[:, None], 0.0, model.point * (1.0 - model.point))
    )
    # The draws centre on the point; the judge's per-query errors spread the counts
    # beyond the labels' own Bernoulli spread.
    assert round(float(np.mean(mean - point)), 4) == EXPECTED_MEAN_OFFSET
    assert round(float(variance.sum() / bernoulli.sum()), 3) == EXPECTED_SPREAD_RATIO
    assert variance.sum() > 1.5 * bernoulli.sum()


EXPECTED_MEAN_OFFSET = -0.0376
EXPECTED_SPREAD_RATIO = 2.045
"""The draws' counts: 0.04 of a document below the point on average (the beta law's
skew), with twice the variance of independent labels."""


def test_remainder_is_nought_for_linear_and_recall_metrics() -> None:
    pool, _, labels, _, model = _model(1, 0.15)
    counts = model.counts(pool)
    for spec in (MetricSpec("p", 10), MetricSpec("recall", 100)):
        lin = metric_linearisation(pool, "run0", model.point, spec, counts=counts)
        assert expected_remainder(pool, spec, lin, model.draws, counts, relevant_at=2) == 0.0
    spec = MetricSpec("ndcg", 10)
    values = [
        expected_remainder(
            pool,
            spec,
            metric_linearisation(pool, run, model.point, spec, counts=counts),
            model.draws,
            counts,
            relevant_at=labels.relevant_at,
        )
        for run in ("run0", "run1", "run2")
    ]
    assert [round(v, 5) for v in values] == EXPECTED_NDCG_REMAINDERS
    # The tangent of the concave ideal DCG overstates it: the expected ideal DCG under
    # the model is below the ideal DCG at the point's counts.
    drawn = ideal_dcg(model.draws.counts.reshape(-1, 3), 10)[0].reshape(64, -1).mean(axis=0)
    assert float(np.mean(drawn)) < float(np.mean(ideal_dcg(counts, 10)[0]))


EXPECTED_NDCG_REMAINDERS = [0.01313, 0.01268, 0.01166]


def test_remainder_moves_ndcg_toward_the_truth(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mean error of nDCG@10 over 30 uniform samples of 8% (~5 reviews per query), with
    the expected remainder and without it (the linearisation alone)."""
    pool, grades, p = _world(0, queries=20, docs=60, depth=25)
    labels = _labels(pool, p)
    truth = _truth(pool, grades)
    spec = [METRICS[0]]

    def mean_errors() -> dict[str, float]:
        errors: dict[str, list[float]] = {run: [] for run in pool.ranks}
        for seed in range(30):
            sample, _ = draw_sample(pool, labels, int(0.08 * pool.size), seed=seed)
            est = estimate_metrics(
                pool,
                dataclasses.replace(labels, human=np.where(sample.drawn, grades, -1)),
                sample,
                metrics=spec,
                human_only=False,
            )
            for run in pool.ranks:
                errors[run].append(est.ppi[(run, "nDCG@10")].value - truth[(run, "nDCG@10")])
        return {run: round(float(np.mean(e)), 4) for run, e in errors.items()}

    corrected = mean_errors()
    monkeypatch.setattr(_ppi_model, "expected_remainder", lambda *args, **kwargs: 0.0)
    linearised = mean_errors()
    assert corrected == EXPECTED_CORRECTED
    assert linearised == EXPECTED_LINEARISED
    assert sum(abs(v) for v in corrected.values()) < sum(abs(v) for v in linearised.values())


EXPECTED_CORRECTED = {"run0": -0.0665, "run1": 0.014, "run2": -0.015}
EXPECTED_LINEARISED = {"run0": -0.0785, "run1": 0.0025, "run2": -0.0263}
"""In this small world (20 queries, ~5 reviews each) the linearisation alone
underestimates the best run's nDCG@10 by 0.079 on average; the remainder takes 0.012 of
it back and the sum of the three runs' absolute errors falls from 0.107 to 0.096."""
