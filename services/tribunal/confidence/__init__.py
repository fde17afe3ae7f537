"""Confidence: calibrated P(correct) from the pipeline's signals; a hallucination-rate guarantee.

Framework-free (no grpc, no ray): :mod:`.servicer` adapts it to gRPC and
:mod:`.app` to Ray Serve.

- :class:`Signals` — what the pipeline measured about one candidate; a stage
  that did not run is missing (``None``), never zero.
- :class:`FeatureSpace` — signals to vectors: mean imputation + missing indicators.
- Calibrators — :class:`PlattCalibrator` (logistic on the signal vector),
  :class:`IsotonicCalibrator` and :class:`TemperatureCalibrator` (one score).
- :func:`select_risk_threshold` — the lowest threshold whose Clopper–Pearson
  upper bound on P(wrong | accepted) is ≤ α at confidence 1 − δ
  (fixed-sequence scan); :func:`acceptance_outcome` for plain thresholds.
- :func:`fit_artifact` / :class:`CalibratorArtifact` — fit, save, load a
  versioned artifact; :func:`evaluate_artifacts` — held-out report.
- :class:`ConfidenceScorer` — what the service runs: signals → confidence,
  decision (ACCEPT / ESCALATE / FALLBACK), threshold, version, α.
"""

from ._artifact import ARTIFACT_FORMAT, CalibratorArtifact, json_ready
from ._calibrators import (
    CALIBRATORS,
    Calibrator,
    CalibratorKind,
    IsotonicCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
    make_calibrator,
)
from ._data import LabelledSignals, Split, read_labelled_signals, split_rows, write_labelled_signals
from ._evaluation import PLAIN_THRESHOLD, calibration_metrics, evaluate_artifacts, markdown_report
from ._features import FeatureSpace, signal_values
from ._fitting import FitConfig, fit_artifact
from ._scorer import ConfidenceScorer, ScoreResult, default_artifact_path
from ._signals import PROBABILITY_FIELDS, SIGNAL_FIELDS, DebateOutcome, Signals
from ._threshold import (
    AcceptanceOutcome,
    Decision,
    RiskThreshold,
    acceptance_outcome,
    clopper_pearson_upper,
    decide,
    min_accepted_for,
    select_risk_threshold,
)

__all__ = [
    "ARTIFACT_FORMAT",
    "CALIBRATORS",
    "PLAIN_THRESHOLD",
    "PROBABILITY_FIELDS",
    "SIGNAL_FIELDS",
    "AcceptanceOutcome",
    "Calibrator",
    "CalibratorArtifact",
    "CalibratorKind",
    "ConfidenceScorer",
    "DebateOutcome",
    "Decision",
    "FeatureSpace",
    "FitConfig",
    "IsotonicCalibrator",
    "LabelledSignals",
    "PlattCalibrator",
    "RiskThreshold",
    "ScoreResult",
    "Signals",
    "Split",
    "TemperatureCalibrator",
    "acceptance_outcome",
    "calibration_metrics",
    "clopper_pearson_upper",
    "decide",
    "default_artifact_path",
    "evaluate_artifacts",
    "fit_artifact",
    "json_ready",
    "make_calibrator",
    "markdown_report",
    "min_accepted_for",
    "read_labelled_signals",
    "select_risk_threshold",
    "signal_values",
    "split_rows",
    "write_labelled_signals",
]
