"""The scorer the service runs: signals → calibrated confidence → decision.

A threshold is in one of three states (:class:`ThresholdStatus`): *certified*
for the requested α by the artifact's risk control, *plain* (a configured fixed
threshold, no guarantee), or *not certified* — the artifact holds no threshold
that qualified for α, so nothing is accepted; the result still carries the
calibrated confidence, and the gateway reports the fallback as
``NO_CERTIFIED_THRESHOLD`` with the signals audited.

An artifact from ``tribunal calibrate`` is bound to a KB collection version, a
matcher and a retrieval model: the scorer refuses to load it under another profile
embedder (when it is bound to a profile embedder), and refuses a request whose KB
version, matcher or retrieval model (as the gateway reports them) differs —
FAILED_PRECONDITION, naming the command that recalibrates.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import ConfigError, InvalidArgumentError, TribunalError, resolve_artifact
from ._artifact import CalibratorArtifact
from ._binding import embedder_version
from ._signals import Signals
from ._threshold import Decision, decide

if TYPE_CHECKING:
    from ..core import Settings

__all__ = [
    "ConfidenceScorer",
    "RequestVersions",
    "ScoreResult",
    "ThresholdStatus",
    "default_artifact_path",
]


class ThresholdStatus(enum.StrEnum):
    """Where the threshold of a result comes from."""

    CERTIFIED = "certified"
    """Risk-controlled for the result's α (hallucination rate ≤ α w.p. ≥ 1 − δ)."""
    PLAIN = "plain"
    """A configured fixed threshold: no guarantee."""
    NOT_CERTIFIED = "not_certified"
    """No threshold qualified for α: nothing is accepted (threshold +inf)."""


@dataclass(frozen=True)
class RequestVersions:
    """The KB, matcher and retrieval model a request's candidates came from, and how many
    candidates the gateway scores per query (empty / 0: not reported)."""

    collection_version: str = ""
    matcher: str = ""
    candidates: int = 0
    retrieval_model: str = ""
    """The model whose vectors the KB's dense search compared (``SearchResponse``
    ``retrieval_model``)."""


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
    status: ThresholdStatus = ThresholdStatus.CERTIFIED
    """Certified, plain, or not certified (see :class:`ThresholdStatus`)."""


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
        FailedPreconditionError: the artifact is bound to another profile embedder than
            ``embedder`` (when given; a binding to a tuned model is checked per request).
    """

    def __init__(
        self,
        artifact: CalibratorArtifact,
        *,
        alpha: float,
        escalate_band: float = 0.0,
        plain_threshold: float | None = None,
        embedder: str | None = None,
    ) -> None:
        # A plain threshold promises nothing, so it is not refused where the certified one
        # would be (another embedder, KB or matcher): the binding guards the guarantee.
        if artifact.binding is not None and embedder is not None and plain_threshold is None:
            artifact.binding.check_serving(embedder=embedder, artifact_version=artifact.version)
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
                    "no threshold is certified for the default alpha: nothing will be "
                    "accepted (answers fall back as NO_CERTIFIED_THRESHOLD)",
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
            embedder=embedder_version(settings) if settings.roles is not None else None,
        )

    def _threshold(
        self, alpha: float | None, where: str
    ) -> tuple[float | None, float, ThresholdStatus]:
        if self.plain_threshold is not None:
            if alpha is not None:
                raise InvalidArgumentError(
                    "this service uses a plain threshold and guarantees no hallucination rate; "
                    "do not set alpha",
                    field=where,
                )
            return self.plain_threshold, 0.0, ThresholdStatus.PLAIN
        if alpha is None:
            alpha = self.alpha
        elif not (math.isfinite(alpha) and 0.0 < alpha < 1.0):
            raise InvalidArgumentError(f"alpha must be in (0, 1), got {alpha}", field=where)
        try:
            threshold = self.artifact.threshold_for(alpha).threshold
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(exc.message, field=where) from None
        status = ThresholdStatus.NOT_CERTIFIED if threshold is None else ThresholdStatus.CERTIFIED
        return threshold, alpha, status

    @property
    def accepts_anything(self) -> bool:
        """False when the default α has no certified threshold (and no plain one is set):
        every answer then falls back, whatever the signals."""
        if self.plain_threshold is not None:
            return True
        return self.artifact.threshold_for(self.alpha).threshold is not None

    def check_versions(
        self, versions: RequestVersions, where: str = "", *, strict: bool = False
    ) -> None:
        """Refuse a request whose KB, matcher or retrieval model is not the one the
        artifact is bound to.

        Raises:
            FailedPreconditionError: a reported version differs (the message names
                ``tribunal calibrate``); unbound artifacts, and a plain threshold (no
                guarantee to guard), accept any. ``strict``: an unreported KB version or
                retrieval model is refused too.
        """
        binding = self.artifact.binding
        if binding is not None and self.plain_threshold is None:
            binding.check_request(
                collection_version=versions.collection_version,
                matcher=versions.matcher,
                candidates=versions.candidates,
                retrieval_model=versions.retrieval_model,
                artifact_version=self.version,
                where=where,
                strict=strict,
            )

    def score(
        self,
        signals: Signals,
        alpha: float | None = None,
        versions: RequestVersions | None = None,
    ) -> ScoreResult:
        """Score one candidate; ``alpha`` overrides the default (it must have a threshold).

        Raises:
            InvalidArgumentError: an unknown judge/extra name, a missing score the
                calibrator needs, or an alpha without a threshold; ``field`` names it.
            FailedPreconditionError: ``versions`` differ from the artifact's binding.
        """
        return self._score([signals], [alpha], [versions], single=True)[0]

    def score_many(
        self,
        signals: Sequence[Signals],
        alphas: Sequence[float | None] | None = None,
        versions: Sequence[RequestVersions | None] | None = None,
    ) -> list[ScoreResult]:
        """Score many at once (one vectorised prediction); error fields start ``items[i].``."""
        alphas = list(alphas) if alphas is not None else [None] * len(signals)
        if len(alphas) != len(signals):
            raise InvalidArgumentError("one alpha (or None) per item", field="alpha")
        reported = list(versions) if versions is not None else [None] * len(signals)
        if len(reported) != len(signals):
            raise InvalidArgumentError("one version report (or None) per item", field="items")
        return self._score(signals, alphas, reported, single=False)

    def _score(
        self,
        signals: Sequence[Signals],
        alphas: Sequence[float | None],
        versions: Sequence[RequestVersions | None],
        *,
        single: bool,
    ) -> list[ScoreResult]:
        thresholds = []
        for i, (item, alpha, reported) in enumerate(zip(signals, alphas, versions, strict=True)):
            prefix = "" if single else f"items[{i}]."
            if reported is not None:
                self.check_versions(reported, prefix)
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
                status=status,
            )
            for confidence, (threshold, alpha, status) in zip(confidences, thresholds, strict=True)
        ]
