"""Binary classification and calibration metrics: the one place they are defined.

Calibrator fitting and evaluation (``tribunal confidence``), label job comparisons
(``tribunal label compare``) and the lab's evaluation runners all read them from here.
Binary tasks throughout: ``y_true`` in {0, 1}, ``p`` = P(label 1) in [0, 1].
Standard metrics come from scikit-learn; ECE, HMR/accHMR and the bootstrap
are written here because no well-kept library defines them the way
DESIGN.md does (HMR/accHMR are BITEM's; sklearn has no binned ECE).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "BinaryReport",
    "ConfidenceInterval",
    "acc_hmr",
    "accuracy",
    "auroc",
    "balanced_accuracy",
    "binary_report",
    "bootstrap_ci",
    "brier",
    "class_recalls",
    "expected_calibration_error",
    "hmr",
    "reliability_diagram",
]


def _sklearn_metrics() -> Any:
    """``sklearn.metrics``, imported on first use: serving processes import this module
    but never compute a metric, and scikit-learn's import costs seconds of CPU."""
    from sklearn import metrics

    return metrics


def _labels(y: ArrayLike) -> NDArray[np.int64]:
    array = np.asarray(y)
    if array.ndim != 1:
        raise ValueError(f"expected a 1-d array of labels, got shape {array.shape}")
    if array.size and not np.isin(array, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    return array.astype(np.int64)


def _probabilities(p: ArrayLike, n: int) -> NDArray[np.float64]:
    array = np.asarray(p, dtype=np.float64)
    if array.shape != (n,):
        raise ValueError(f"expected {n} probabilities, got shape {array.shape}")
    if not np.isfinite(array).all() or (array < 0).any() or (array > 1).any():
        raise ValueError("probabilities must be finite and in [0, 1]")
    return array


def accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Share of exact matches."""
    return float(_sklearn_metrics().accuracy_score(_labels(y_true), _labels(y_pred)))


def balanced_accuracy(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean of the recalls of the classes present in ``y_true`` (robust to class imbalance);
    NaN when ``y_true`` is empty.

    scikit-learn's definition, in numpy: a bootstrap calls it ~10⁴ times, often on
    resamples holding one class, where scikit-learn warns on every call.
    """
    truth, pred = _labels(y_true), _labels(y_pred)
    if pred.shape != truth.shape:
        raise ValueError(f"expected {truth.size} predictions, got shape {pred.shape}")
    recalls = [float((pred[truth == c] == c).mean()) for c in (0, 1) if (truth == c).any()]
    return float(np.mean(recalls)) if recalls else float("nan")


def class_recalls(y_true: ArrayLike, y_pred: ArrayLike) -> dict[int, float]:
    """Recall of each class present in ``y_true`` (1: relevant/support, 0: the rest)."""
    truth, pred = _labels(y_true), _labels(y_pred)
    return {int(c): float((pred[truth == c] == c).mean()) for c in np.unique(truth)}


def auroc(y_true: ArrayLike, p: ArrayLike) -> float:
    """Area under the ROC curve; NaN when only one class is present."""
    truth = _labels(y_true)
    scores = _probabilities(p, truth.size)
    if np.unique(truth).size < 2:
        return float("nan")
    return float(_sklearn_metrics().roc_auc_score(truth, scores))


def brier(y_true: ArrayLike, p: ArrayLike) -> float:
    """Mean squared error of the probabilities."""
    truth = _labels(y_true)
    return float(_sklearn_metrics().brier_score_loss(truth, _probabilities(p, truth.size)))


def expected_calibration_error(y_true: ArrayLike, p: ArrayLike, n_bins: int = 10) -> float:
    """Binned ECE: Σ_b (n_b / N) · |mean(y in b) − mean(p in b)| over equal-width bins of p.

    The last bin is closed on the right so p = 1 is counted.
    """
    truth = _labels(y_true)
    scores = _probabilities(p, truth.size)
    if truth.size == 0:
        return float("nan")
    bins = np.minimum((scores * n_bins).astype(np.int64), n_bins - 1)
    total = 0.0
    for b in range(n_bins):
        mask = bins == b
        if mask.any():
            total += mask.mean() * abs(truth[mask].mean() - scores[mask].mean())
    return float(total)


def hmr(correct: ArrayLike, confidence: ArrayLike) -> float:
    """BITEM's harmonic mean of R_O and R_U.

    R_O = 1 − mean confidence over wrong answers (1 if none): not over-confident
    when wrong. R_U = mean confidence over correct answers (1 if none): not
    under-confident when right. HMR = 2·R_O·R_U / (R_O + R_U), 0 if both are 0.
    """
    ok = _labels(correct).astype(bool)
    conf = _probabilities(confidence, ok.size)
    r_o = 1.0 - float(conf[~ok].mean()) if (~ok).any() else 1.0
    r_u = float(conf[ok].mean()) if ok.any() else 1.0
    return 0.0 if r_o + r_u == 0 else 2 * r_o * r_u / (r_o + r_u)


def acc_hmr(correct: ArrayLike, confidence: ArrayLike) -> float:
    """Accuracy × HMR (BITEM)."""
    ok = _labels(correct)
    return float(ok.mean()) * hmr(ok, confidence)


@dataclass(frozen=True)
class BinaryReport:
    """The standard binary summary of one evaluation."""

    n: int
    positives: int
    threshold: float
    accuracy: float
    balanced_accuracy: float
    recall_positive: float
    recall_negative: float
    auroc: float
    ece: float
    brier: float

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def binary_report(y_true: ArrayLike, p: ArrayLike, threshold: float = 0.5) -> BinaryReport:
    """Accuracy, balanced accuracy, class recalls (predicting 1 when p ≥ threshold), AUROC,
    ECE and Brier."""
    truth = _labels(y_true)
    scores = _probabilities(p, truth.size)
    pred = (scores >= threshold).astype(np.int64)
    recalls = class_recalls(truth, pred)
    return BinaryReport(
        n=int(truth.size),
        positives=int(truth.sum()),
        threshold=threshold,
        accuracy=accuracy(truth, pred),
        balanced_accuracy=balanced_accuracy(truth, pred),
        recall_positive=recalls.get(1, float("nan")),
        recall_negative=recalls.get(0, float("nan")),
        auroc=auroc(truth, scores),
        ece=expected_calibration_error(truth, scores),
        brier=brier(truth, scores),
    )


@dataclass(frozen=True)
class ConfidenceInterval:
    """A point estimate with a percentile-bootstrap interval."""

    value: float
    low: float
    high: float
    level: float

    def __str__(self) -> str:
        return f"{self.value:.3f} [{self.low:.3f}, {self.high:.3f}]"


def bootstrap_ci(
    metric: Callable[[NDArray[np.int64], NDArray[np.float64]], float],
    y_true: Sequence[int] | NDArray[np.int64],
    p: Sequence[float] | NDArray[np.float64],
    *,
    n_resamples: int = 1000,
    level: float = 0.95,
    seed: int = 0,
) -> ConfidenceInterval:
    """Percentile bootstrap over items (resampled with replacement, fixed seed).

    Resamples on which the metric is undefined (NaN, e.g. one class only) are
    dropped from the interval.
    """
    truth = _labels(y_true)
    scores = _probabilities(p, truth.size)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_resamples):
        index = rng.integers(0, truth.size, truth.size)
        value = metric(truth[index], scores[index])
        if np.isfinite(value):
            values.append(value)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(values, [tail, 100 - tail]) if values else (np.nan, np.nan)
    return ConfidenceInterval(metric(truth, scores), float(low), float(high), level)


def reliability_diagram(
    y_true: ArrayLike, p: ArrayLike, path: Path, *, n_bins: int = 10, title: str = ""
) -> Path:
    """Write a reliability diagram (observed frequency vs mean predicted, per bin) as PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    truth = _labels(y_true)
    scores = _probabilities(p, truth.size)
    bins = np.minimum((scores * n_bins).astype(np.int64), n_bins - 1)
    centers, observed, counts = [], [], []
    for b in range(n_bins):
        mask = bins == b
        if mask.any():
            centers.append(scores[mask].mean())
            observed.append(truth[mask].mean())
            counts.append(int(mask.sum()))
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(5, 6), gridspec_kw={"height_ratios": [3, 1]}, sharex=True
    )
    top.plot([0, 1], [0, 1], linestyle="--", color="grey", label="perfect calibration")
    top.plot(centers, observed, marker="o", label="observed")
    top.set_ylabel("observed frequency of label 1")
    ece = expected_calibration_error(truth, scores, n_bins)
    top.set_title(title or f"reliability (ECE {ece:.3f}, n={truth.size})")
    top.legend(loc="upper left")
    bottom.bar(centers, counts, width=1 / n_bins * 0.8)
    bottom.set_xlabel("mean predicted probability")
    bottom.set_ylabel("items")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
