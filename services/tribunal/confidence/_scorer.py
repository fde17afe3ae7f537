"""The scorer the service runs: signals → calibrated confidence → decision."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import ConfigError, InvalidArgumentError, TribunalError
from ..core._artifacts import resolve_artifact
from ._artifact import CalibratorArtifact
from ._signals import Signals
from ._threshold import Decision, decide

if TYPE_CHECKING:
    from ..core import Settings

__all__ = ["ConfidenceScorer", "ScoreResult", "default_artifact_path"]

log = logging.getLogger(__name__)


def default_artifact_path(settings: Settings) -> Path:
    """``confidence.artifact_path``; else ``<data_dir>/confidence/calibrator.json`` when it
    exists; else the calibrator shipped for the profile and its ``ensemble.matcher``
    (``confidence/<matcher>-calibrator.json``: each matcher's P(match) means something
    else, and the judges' calibrator reads each judge's P(yes) too)."""
    return resolve_artifact(
        settings,
        settings.confidence.artifact_path,
        "confidence/calibrator.json",
        shipped=f"confidence/{settings.ensemble.matcher}-calibrator.json",
    )


@dataclass(frozen=True)
class ScoreResult:
    """The verdict on one candidate."""

    confidence: float
    """Calibrated P(the candidate is a correct answer)."""
    decision: Decision
    threshold: float
    """Acceptance threshold used; +inf when no threshold qualified (nothing is accepted)."""
    calibrator_version: str
    alpha: float
    """Hallucination rate the threshold guarantees at 1 − δ; 0 under plain thresholding."""


class ConfidenceScorer:
    """Scores signals with one calibrator artifact.

    Args:
        artifact: The fitted calibrator and its thresholds.
        alpha: Default target hallucination rate; the artifact must hold a
            threshold selected for it.
        escalate_band: Confidences in ``[threshold − band, threshold)`` are ESCALATE.
        plain_threshold: When set, accept at this fixed confidence instead of the
            risk-controlled threshold: no guarantee, so the reported α is 0 and
            a request may not ask for one.

    Raises:
        ConfigError: the artifact has no threshold for ``alpha``.
    """

    def __init__(
        self,
        artifact: CalibratorArtifact,
        *,
        alpha: float,
        escalate_band: float = 0.0,
        plain_threshold: float | None = None,
    ) -> None:
        self.artifact = artifact
        self.version = artifact.version
        self.escalate_band = escalate_band
        self.plain_threshold = plain_threshold
        self.alpha = alpha
        if plain_threshold is None:
            try:
                default = artifact.threshold_for(alpha)
            except InvalidArgumentError as exc:
                raise ConfigError(exc.message, field="confidence.alpha") from None
            if default.threshold is None:
                # Legitimate (fail closed), but an operator should know before traffic arrives.
                log.warning(
                    "no threshold qualified for the default alpha: nothing will be accepted",
                    extra={"alpha": alpha, "calibrator_version": self.version},
                )

    @classmethod
    def from_settings(cls, settings: Settings) -> ConfidenceScorer:
        """Load the artifact named by ``settings.confidence`` and configure the scorer."""
        config = settings.confidence
        return cls(
            CalibratorArtifact.load(default_artifact_path(settings)),
            alpha=config.alpha,
            escalate_band=config.escalate_band,
            plain_threshold=config.plain_threshold,
        )

    def _threshold(self, alpha: float | None, where: str) -> tuple[float | None, float]:
        if self.plain_threshold is not None:
            if alpha is not None:
                raise InvalidArgumentError(
                    "this service uses a plain threshold and guarantees no hallucination rate; "
                    "do not set alpha",
                    field=where,
                )
            return self.plain_threshold, 0.0
        if alpha is None:
            alpha = self.alpha
        elif not (math.isfinite(alpha) and 0.0 < alpha < 1.0):
            raise InvalidArgumentError(f"alpha must be in (0, 1), got {alpha}", field=where)
        try:
            return self.artifact.threshold_for(alpha).threshold, alpha
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(exc.message, field=where) from None

    def score(self, signals: Signals, alpha: float | None = None) -> ScoreResult:
        """Score one candidate; ``alpha`` overrides the default (it must have a threshold).

        Raises:
            InvalidArgumentError: an unknown judge/extra name, a missing score the
                calibrator needs, or an alpha without a threshold; ``field`` names it.
        """
        return self._score([signals], [alpha], single=True)[0]

    def score_many(
        self, signals: Sequence[Signals], alphas: Sequence[float | None] | None = None
    ) -> list[ScoreResult]:
        """Score many at once (one vectorised prediction); error fields start ``items[i].``."""
        alphas = list(alphas) if alphas is not None else [None] * len(signals)
        if len(alphas) != len(signals):
            raise InvalidArgumentError("one alpha (or None) per item", field="alpha")
        return self._score(signals, alphas, single=False)

    def _score(
        self, signals: Sequence[Signals], alphas: Sequence[float | None], *, single: bool
    ) -> list[ScoreResult]:
        thresholds = []
        for i, (item, alpha) in enumerate(zip(signals, alphas, strict=True)):
            prefix = "" if single else f"items[{i}]."
            thresholds.append(self._threshold(alpha, f"{prefix}alpha"))
            try:
                self.artifact.calibrator.check(item)
            except TribunalError as exc:
                raise InvalidArgumentError(exc.message, field=f"{prefix}{exc.field}") from None
        confidences = self.artifact.predict(signals)
        return [
            ScoreResult(
                confidence=float(confidence),
                decision=decide(float(confidence), threshold, self.escalate_band),
                threshold=math.inf if threshold is None else threshold,
                calibrator_version=self.version,
                alpha=alpha,
            )
            for confidence, (threshold, alpha) in zip(confidences, thresholds, strict=True)
        ]
