"""Operating points of a matching score and their figures with bootstrap intervals.

Shared by ``tribunal-lab eval matching-features`` (fit, then report) and its scoring of a
given matcher on a labelled file (:mod:`._matching_scoring`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import rankdata
from tribunal.core.metrics import bootstrap_ci

from ._sweep_stats import auroc

__all__ = ["empirical_risk_threshold", "max_accuracy_threshold", "outcome", "report_points"]

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


def max_accuracy_threshold(y: Ints, score: Floats) -> float:
    """The cut (−inf, midpoints between distinct scores, +inf) maximising the accuracy
    of ``score ≥ cut``; among ties the highest (it accepts the fewest)."""
    distinct = np.unique(score)
    cuts = np.concatenate(([-np.inf], (distinct[:-1] + distinct[1:]) / 2, [np.inf]))
    accepted = score[None, :] >= cuts[:, None]
    accuracy = (accepted == (y[None, :] == 1)).mean(axis=1)
    best = np.flatnonzero(np.isclose(accuracy, accuracy.max(), rtol=0, atol=1e-12))
    return float(cuts[best[-1]])


def empirical_risk_threshold(y: Ints, score: Floats, alpha: float) -> float | None:
    """The lowest observed score λ whose accepted items (score ≥ λ) have a hallucination
    rate ≤ ``alpha`` on these items (no guarantee); None when none has."""
    best = None
    for value in np.unique(score)[::-1]:
        accepted = score >= value
        if (y[accepted] == 0).sum() <= alpha * accepted.sum():
            best = float(value)
    return best


def outcome(y: Ints, accepted: NDArray[np.bool_]) -> dict[str, float]:
    """Accuracy, hallucination (wrong / accepted; NaN when none), coverage and FPR."""
    wrong = int((accepted & (y == 0)).sum())
    negatives = int((y == 0).sum())
    return {
        "accuracy": float((accepted == (y == 1)).mean()) if y.size else math.nan,
        "hallucination": wrong / int(accepted.sum()) if accepted.any() else math.nan,
        "coverage": float(accepted.mean()) if y.size else math.nan,
        "false_positive_rate": wrong / negatives if negatives else math.nan,
    }


def _interval(
    metric: Callable[[Ints, Floats], float], y: Ints, values: Floats, resamples: int, seed: int
) -> dict[str, float]:
    ci = bootstrap_ci(metric, y, values, n_resamples=resamples, seed=seed)
    return {"value": ci.value, "low": ci.low, "high": ci.high}


def _decision_metric(name: str) -> Callable[[Ints, Floats], float]:
    """``name`` of :func:`outcome` as a bootstrap metric of (labels, 0/1 decisions)."""
    return lambda y, decision: outcome(y, decision == 1)[name]


def _report(
    y: Ints, score: Floats, thresholds: dict[str, float | None], resamples: int, seed: int
) -> dict[str, Any]:
    """Test figures of one scorer on one set of items, every operating point."""
    # bootstrap_ci wants values in [0, 1]: decisions as 0/1, and for AUROC the ranks
    # scaled into [0, 1] (AUROC depends on the order only). One seed: same resamples.
    ranks = rankdata(score) / max(score.size, 1) if score.size else score
    out: dict[str, Any] = {
        "n": int(y.size),
        "positives": int(y.sum()),
        "auroc": _interval(auroc, y, ranks, resamples, seed),
    }
    for point, threshold in thresholds.items():
        accepted = np.zeros(y.size, bool) if threshold is None else score >= threshold
        row: dict[str, Any] = {"threshold": threshold}
        for metric in ("accuracy", "hallucination", "coverage"):
            row[metric] = _interval(
                _decision_metric(metric), y, accepted.astype(np.float64), resamples, seed
            )
        row["false_positive_rate"] = outcome(y, accepted)["false_positive_rate"]
        row["accepted"] = int(accepted.sum())
        row["wrong"] = int((accepted & (y == 0)).sum())
        out[point] = row
    return out


report_points = _report
