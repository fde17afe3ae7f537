"""Acceptance thresholds: one with a hallucination-rate guarantee, plain ones, and decisions.

The hallucination rate of a threshold λ is P(wrong | accepted), accepted meaning
confidence ≥ λ (accepted-but-wrong / accepted, as DESIGN.md defines it).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ..core import InvalidArgumentError

__all__ = [
    "AcceptanceCurve",
    "AcceptanceOutcome",
    "Decision",
    "RiskThreshold",
    "acceptance_outcome",
    "clopper_pearson_upper",
    "decide",
    "min_accepted_for",
]


class Decision(enum.StrEnum):
    """What to do with a candidate."""

    ACCEPT = "accept"
    """Return the KB answer verbatim."""
    ESCALATE = "escalate"
    """Just below the threshold: route to the debate or a human queue."""
    FALLBACK = "fallback"
    """Return the configured fallback text."""


def _rate(value: float, name: str) -> float:
    if not (isinstance(value, int | float) and math.isfinite(value) and 0.0 < value < 1.0):
        raise InvalidArgumentError(f"{name} must be in (0, 1), got {value!r}", field=name)
    return float(value)


def _inputs(
    confidence: ArrayLike, correct: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    conf = np.asarray(confidence, dtype=np.float64)
    ok = np.asarray(correct)
    if conf.ndim != 1 or ok.shape != conf.shape:
        raise InvalidArgumentError(
            f"confidence and labels must be 1-d and the same length ({conf.shape} vs {ok.shape})",
            field="labels",
        )
    if not np.isin(ok, (0, 1)).all():
        raise InvalidArgumentError("labels must be 0 or 1", field="labels")
    if not np.isfinite(conf).all():
        raise InvalidArgumentError("confidences must be finite", field="confidence")
    return conf, ok.astype(bool)


@dataclass(frozen=True)
class AcceptanceCurve:
    """What accepting at each distinct calibration confidence would do, highest first.

    Accepting at λ takes every item with confidence ≥ λ, ties included, so the
    curve has one point per distinct confidence.
    """

    thresholds: NDArray[np.float64]
    """Distinct confidences, descending."""
    accepted: NDArray[np.int64]
    """Items accepted at each threshold."""
    errors: NDArray[np.int64]
    """Wrong items among them."""
    n: int
    """All calibration items."""

    @classmethod
    def of(cls, confidence: ArrayLike, correct: ArrayLike) -> AcceptanceCurve:
        """Validate and sort ``confidence`` with its 0/1 ``correct`` labels.

        Raises:
            InvalidArgumentError: arrays of different shapes, labels not 0/1, or a
                non-finite confidence.
        """
        conf, ok = _inputs(confidence, correct)
        order = np.argsort(-conf, kind="stable")
        sorted_conf = conf[order]
        wrong_so_far = np.cumsum(~ok[order])
        ends = np.flatnonzero(np.append(sorted_conf[1:] != sorted_conf[:-1], True))
        return cls(
            sorted_conf[ends],
            (ends + 1).astype(np.int64),
            wrong_so_far[ends].astype(np.int64),
            int(conf.size),
        )

    def at(self, threshold: float) -> tuple[int, int]:
        """(accepted, errors) when accepting at confidence ≥ ``threshold``."""
        index = int(np.searchsorted(-self.thresholds, -threshold, side="right")) - 1
        if index < 0:
            return 0, 0
        return int(self.accepted[index]), int(self.errors[index])


def clopper_pearson_upper(errors: int, n: int, delta: float) -> float:
    """One-sided upper (1 − δ) Clopper–Pearson bound on a binomial rate after ``errors`` in ``n``.

    The p at which seeing at most ``errors`` has probability δ: the (1 − δ)
    quantile of Beta(errors + 1, n − errors); 1 when ``errors == n`` (or n = 0).
    With no errors it is 1 − δ^(1/n).
    """
    if not 0 <= errors <= n:
        raise ValueError(f"need 0 <= errors <= n, got errors={errors}, n={n}")
    if errors == n:
        return 1.0
    return float(stats.beta.ppf(1.0 - delta, errors + 1, n - errors))


def min_accepted_for(alpha: float, delta: float) -> int:
    """Fewest accepted items whose bound can reach α at all (with zero errors).

    Solves 1 − δ^(1/n) ≤ α, i.e. n ≥ ln δ / ln(1 − α).
    """
    n = max(1, math.ceil(math.log(delta) / math.log1p(-alpha)))
    # Guard the float rounding of the closed form against the bound itself.
    while n > 1 and clopper_pearson_upper(0, n - 1, delta) <= alpha:
        n -= 1
    while clopper_pearson_upper(0, n, delta) > alpha:
        n += 1
    return n


@dataclass(frozen=True)
class RiskThreshold:
    """The threshold chosen for a target hallucination rate α at confidence 1 − δ."""

    alpha: float
    """Target hallucination rate P(wrong | accepted)."""
    delta: float
    """Allowed probability that the guarantee fails (calibration data unlucky)."""
    threshold: float | None
    """Accept when confidence ≥ this; None: no threshold qualified, never accept."""
    accepted: int
    """Calibration items accepted at the threshold."""
    errors: int
    """Wrong items among them."""
    upper_bound: float | None
    """Upper confidence bound on the hallucination rate at the threshold (≤ α), as the
    method computes it (Clopper–Pearson for every method here)."""
    n: int
    """Calibration items the threshold was selected on."""
    method: str = "clopper-pearson"
    """The risk-control method that selected it (``tribunal.confidence.RISK_METHODS``)."""

    @property
    def coverage(self) -> float:
        """Share of calibration items accepted."""
        return self.accepted / self.n if self.n else 0.0

    @property
    def certified(self) -> bool:
        """True when a threshold qualified (the guarantee covers accepting at it)."""
        return self.threshold is not None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "coverage": self.coverage}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RiskThreshold:
        return cls(**{k: v for k, v in data.items() if k != "coverage"})


@dataclass(frozen=True)
class AcceptanceOutcome:
    """What a fixed threshold did on labelled items (plain thresholding, or a check)."""

    threshold: float | None
    """Accept when confidence ≥ this; None accepts nothing."""
    n: int
    accepted: int
    errors: int
    """Accepted but wrong."""

    @property
    def coverage(self) -> float:
        """Share of items accepted."""
        return self.accepted / self.n if self.n else 0.0

    @property
    def hallucination_rate(self) -> float | None:
        """Accepted-but-wrong / accepted; None when nothing was accepted."""
        return self.errors / self.accepted if self.accepted else None

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "coverage": self.coverage,
            "hallucination_rate": self.hallucination_rate,
        }


def acceptance_outcome(
    confidence: ArrayLike, correct: ArrayLike, threshold: float | None
) -> AcceptanceOutcome:
    """Accept every item with confidence ≥ ``threshold`` and count what got through."""
    conf, ok = _inputs(confidence, correct)
    accepted = np.zeros(conf.size, bool) if threshold is None else conf >= threshold
    return AcceptanceOutcome(
        threshold, int(conf.size), int(accepted.sum()), int((accepted & ~ok).sum())
    )


def decide(confidence: float, threshold: float | None, escalate_band: float = 0.0) -> Decision:
    """ACCEPT at or above ``threshold``; ESCALATE within ``escalate_band`` below it; else FALLBACK.

    With no threshold (none qualified) nothing is accepted or escalated.
    """
    if threshold is None:
        return Decision.FALLBACK
    if confidence >= threshold:
        return Decision.ACCEPT
    if escalate_band > 0 and confidence >= threshold - escalate_band:
        return Decision.ESCALATE
    return Decision.FALLBACK
