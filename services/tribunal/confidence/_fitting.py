"""Fit a calibrator and select its thresholds: labelled signals in, an artifact out."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from ..core import InvalidArgumentError
from ..core.settings import DEFAULT_RISK_METHOD
from ._artifact import CalibratorArtifact
from ._calibrators import CalibratorKind
from ._data import LabelledSignals, split_rows
from ._evaluation import calibration_metrics
from ._kinds import CALIBRATORS, make_calibrator
from ._risk_control import RISK_METHODS, select_threshold

__all__ = ["FitConfig", "fit_artifact"]


@dataclass(frozen=True)
class FitConfig:
    """How to fit: the calibrator, its score, the α's to select thresholds for, the split."""

    calibrator: CalibratorKind = "platt"
    """``platt``, ``isotonic``, ``temperature`` or ``monotone``."""
    score: str | None = None
    """Feature column the single-score calibrators read; for ``platt`` only the raw
    score reports compare against."""
    alphas: tuple[float, ...] = (0.01, 0.05, 0.10)
    """Target hallucination rates to select a threshold for."""
    delta: float = 0.1
    """The guarantee holds with probability ≥ 1 − δ."""
    holdout_fraction: float = 0.3
    """Share of rows kept out of fitting entirely, for evaluation."""
    risk_fraction: float = 0.5
    """Share of the calibration rows used to select thresholds (the rest fit the calibrator)."""
    seed: int = 0
    """Seed of the stratified split."""
    method: str = DEFAULT_RISK_METHOD
    """Risk-control method selecting the thresholds (``RISK_METHODS``)."""

    def __post_init__(self) -> None:
        if self.method not in RISK_METHODS:
            raise InvalidArgumentError(
                f"unknown risk-control method {self.method!r}; "
                f"choose one of {', '.join(RISK_METHODS)}",
                field="method",
            )
        if self.calibrator not in CALIBRATORS:
            raise InvalidArgumentError(
                f"unknown calibrator {self.calibrator!r}; choose one of {', '.join(CALIBRATORS)}",
                field="calibrator",
            )
        if not self.alphas:
            raise InvalidArgumentError("give at least one alpha", field="alpha")
        for name, value in (
            *(("alpha", a) for a in self.alphas),
            ("delta", self.delta),
            ("holdout_fraction", self.holdout_fraction),
            ("risk_fraction", self.risk_fraction),
        ):
            if not 0.0 < value < 1.0:
                raise InvalidArgumentError(f"{name} must be in (0, 1), got {value}", field=name)
        object.__setattr__(self, "alphas", tuple(sorted({float(a) for a in self.alphas})))

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "alphas": list(self.alphas)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FitConfig:
        return cls(**{**data, "alphas": tuple(data["alphas"])})


def fit_artifact(
    data: LabelledSignals, config: FitConfig, *, created: str | None = None
) -> CalibratorArtifact:
    """Split ``data`` (seeded, stratified), fit the calibrator on the fit part, select one
    threshold per α on the risk part, and return the artifact.

    The risk part is never seen by the calibrator: a threshold chosen on confidences
    the calibrator was fitted to would be chosen on optimistic numbers, and the
    risk-control guarantee would not hold. The held-out part is left for
    :func:`~tribunal.confidence.evaluate_artifacts`.
    """
    split = split_rows(
        data.labels,
        holdout_fraction=config.holdout_fraction,
        risk_fraction=config.risk_fraction,
        seed=config.seed,
    )
    fit_rows, risk_rows = data.subset(split.fit), data.subset(split.risk)
    calibrator = make_calibrator(config.calibrator, score=config.score)
    calibrator.fit(fit_rows.signals, fit_rows.labels)
    confidence = calibrator.predict(risk_rows.signals)
    thresholds = tuple(
        select_threshold(
            confidence, risk_rows.labels, alpha=alpha, delta=config.delta, method=config.method
        )
        for alpha in config.alphas
    )
    training_data = {
        "source": data.source.rsplit("/", 1)[-1],
        "sha256": data.sha256,
        "rows": len(data),
        "positives": int(data.labels.sum()),
        "split": split.sizes(),
    }
    extra: dict[str, Any] = {} if created is None else {"created": created}
    return CalibratorArtifact(
        calibrator=calibrator,
        thresholds=thresholds,
        config=config.to_dict(),
        training_data=training_data,
        metrics={"risk_split": calibration_metrics(risk_rows.labels, confidence)},
        **extra,
    )
