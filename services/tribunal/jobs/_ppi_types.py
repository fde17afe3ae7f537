"""The evaluation's data: what is known of each pooled pair, the human sample, and the
estimates (see :mod:`._ppi`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._ppi_pool import Floats

__all__ = [
    "Estimate",
    "EvaluationEstimates",
    "HumanSample",
    "PoolLabels",
    "grades_to_indicators",
]


def grades_to_indicators(grades: NDArray[np.int64], levels: int) -> Floats:
    """Grades (−1: unknown → 0s) as cumulative indicators z[t] = 1{g ≥ t + 1}."""
    thresholds = np.arange(1, levels + 1)
    return (grades[:, None] >= thresholds[None, :]).astype(np.float64)


@dataclass(frozen=True)
class PoolLabels:
    """What is known of every pooled pair.

    ``known``: grade from existing qrels (−1: a hole). ``judge_p``: the judge's
    P(relevant) (NaN where ``known``, and for holes the judge did not label: they are
    predicted from the runs' ranks alone); ``judge_label``: its 0/1 label (0 where
    unlabelled). ``human``: a human
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
        drawn = np.bincount(self.stratum[self.drawn], minlength=len(sizes)).astype(np.float64)
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
                    "human_labels_for_same_width": round(self.human_equivalent[(run, metric)], 1),
                }
                for (run, metric), est in self.ppi.items()
            ],
            "differences": [
                {"metric": metric, "a": a, "b": b, **est.to_json()}
                for (metric, a, b), est in self.differences.items()
            ],
        }
