"""Scoring a given artifact on a labelled file: parts, decision rows, their table.

Two ways to report, chosen by ``--select-split``:

- **all items** (the default): every row applies a decision point that exists before the
  data is seen — the artifact's own threshold, a configured setting — and is reported
  on every item with 95% bootstrap intervals. A row whose threshold is the best one on
  these same items says so (``oracle``): its figure is optimistic.
- **select, then report** (``--select-split FRACTION``): a seeded split stratified by
  label; whatever the evaluation selects (a threshold, a band) is chosen on the
  selection part, and every row is reported on the other part only.

Every row states the decision point it applies and whose it is (:class:`Threshold`).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy.stats import rankdata
from tribunal.core import InvalidArgumentError
from tribunal.core.metrics import balanced_accuracy, bootstrap_ci

from ._sweep_stats import auroc, select_threshold, stratified_split

__all__ = [
    "Threshold",
    "add_scoring_arguments",
    "auroc_ci",
    "best_threshold",
    "ci_text",
    "decision_row",
    "interval",
    "parts",
    "select_split_fraction",
]

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


@dataclass(frozen=True)
class Threshold:
    """A decision point and whose it is."""

    text: str
    """What is applied, e.g. ``P ≥ 0.690`` or ``band 0.29–0.35``."""
    source: str
    """Whose it is / where it came from, e.g. ``configured: entailment.entail_threshold``,
    ``the artifact's``, ``selected on the selection part``, ``oracle: best on these items``."""

    def to_dict(self) -> dict[str, str]:
        return {"applied": self.text, "source": self.source}


def select_split_fraction(value: str) -> float:
    fraction = float(value)
    if not 0.0 < fraction < 1.0:
        raise argparse.ArgumentTypeError("--select-split is a fraction in (0, 1), e.g. 0.5")
    return fraction


def add_scoring_arguments(parser: argparse.ArgumentParser) -> None:
    """``--select-split`` and ``--resamples``, the same on every evaluation."""
    parser.add_argument(
        "--select-split",
        type=select_split_fraction,
        default=None,
        metavar="FRACTION",
        help="select thresholds / bands on this seeded, label-stratified share of the items "
        "and report every row on the rest (default: no selection; report on all items at "
        "the artifact's and the configured decision points)",
    )
    parser.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples")


def parts(labels: Sequence[int] | Ints, select_split: float | None, seed: int) -> tuple[Ints, Ints]:
    """(selection, report) indices: nothing and everything without ``select_split``."""
    y = np.asarray(labels, dtype=np.int64)
    if select_split is None:
        return np.zeros(0, dtype=np.int64), np.arange(y.size, dtype=np.int64)
    return stratified_split(y, seed, select_split)


def interval(
    metric: Any, y: Ints, values: Floats, *, resamples: int, seed: int
) -> dict[str, float | None]:
    """A metric of (labels, values in [0, 1]) with its 95% percentile bootstrap interval."""
    ci = bootstrap_ci(metric, y, values, n_resamples=resamples, seed=seed)

    def finite(x: float) -> float | None:
        return float(x) if math.isfinite(x) else None

    return {"value": finite(ci.value), "low": finite(ci.low), "high": finite(ci.high)}


def auroc_ci(y: Ints, score: Floats, *, resamples: int, seed: int) -> dict[str, float | None]:
    """AUROC of any real score: its ranks scaled into [0, 1] (AUROC reads order only)."""
    ranks = rankdata(score) / max(score.size, 1) if score.size else score
    return interval(auroc, y, np.asarray(ranks, dtype=np.float64), resamples=resamples, seed=seed)


def decision_row(
    y: Ints,
    score: Floats,
    predicted: Ints,
    threshold: Threshold,
    *,
    resamples: int,
    seed: int,
    **extra: Any,
) -> dict[str, Any]:
    """bAcc and class recalls of ``predicted``, AUROC of ``score``, with intervals."""
    if y.size == 0:
        raise InvalidArgumentError("no items to report on", field="data")

    def bacc(truth: Ints, pred: Floats) -> float:
        return balanced_accuracy(truth, pred.astype(np.int64))

    def recall(value: int) -> float | None:
        chosen = y == value
        return float((predicted[chosen] == value).mean()) if chosen.any() else None

    return {
        "threshold": threshold.to_dict(),
        "n": int(y.size),
        "positives": int(y.sum()),
        "balanced_accuracy": interval(
            bacc, y, predicted.astype(np.float64), resamples=resamples, seed=seed
        ),
        "accuracy": float((predicted == y).mean()),
        "recall_positive": recall(1),
        "recall_negative": recall(0),
        "auroc": auroc_ci(y, score, resamples=resamples, seed=seed),
        **extra,
    }


def best_threshold(y: Ints, score: Floats) -> float:
    """The max-balanced-accuracy cut of ``score ≥ cut`` on these items."""
    return select_threshold(y, score)


def ci_text(ci: dict[str, Any] | None) -> str:
    """``value [low, high]`` of an :func:`interval`, or – when undefined."""
    if not ci or ci.get("value") is None:
        return "–"
    if ci.get("low") is None or ci.get("high") is None:
        return f"{ci['value']:.3f}"
    return f"{ci['value']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"
