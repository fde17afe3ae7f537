"""Confidence: calibrated P(correct) from the pipeline's signals; a hallucination-rate guarantee.

Framework-free (no grpc, no ray): :mod:`.servicer` adapts it to gRPC and
:mod:`.app` to Ray Serve.

- :class:`Signals` — what the pipeline measured about one candidate; a stage
  that did not run is missing (``None``), never zero.
- :class:`FeatureSpace` — signals to vectors: mean imputation + missing indicators.
- Calibrators — :class:`PlattCalibrator` (logistic on the signal vector),
  :class:`MonotoneCalibrator` (logistic on KB-independent signals, weights ≥ 0),
  :class:`IsotonicCalibrator` and :class:`TemperatureCalibrator` (one score).
- Risk control (:data:`RISK_METHODS`, :func:`select_threshold`) — the lowest
  threshold whose hallucination rate P(wrong | accepted) is ≤ α with probability
  ≥ 1 − δ: fixed-sequence Clopper–Pearson (:func:`select_risk_threshold`),
  Learn-then-Test (:func:`learn_then_test_threshold`), SGR (:func:`sgr_threshold`);
  :func:`acceptance_outcome` for plain thresholds.
- :func:`fit_artifact` / :class:`CalibratorArtifact` — fit, save, load a
  versioned artifact; :func:`evaluate_artifacts` — held-out report.
- :func:`calibrate` — labelled traffic's candidate signals in, an artifact bound to
  the KB, matcher and embedder versions out (:class:`CalibrationBinding`), with a
  held-out report (:mod:`._calibrate`).
- :class:`AnswerClasses` — a KB's answer-equivalence classes (several entries can
  answer one query), built by a rule plus a review, rerunnable.
- :class:`ConfidenceScorer` — what the service runs: signals → confidence,
  decision (ACCEPT / ESCALATE / FALLBACK), threshold, version, α.
"""

from ._answer_classes import (
    CLASSES_FORMAT,
    AnswerClasses,
    ClassRule,
    ReviewedLink,
    candidate_links,
    classes_from_links,
    file_sha256,
)
from ._artifact import ARTIFACT_FORMAT, LEGACY_FORMAT, CalibratorArtifact, json_ready
from ._binding import CalibrationBinding, embedder_version, recalibrate_command
from ._calibrate import (
    CalibrationConfig,
    CalibrationResult,
    ObservedCandidate,
    calibrate,
    decisions,
)
from ._calibration_report import calibration_markdown, write_calibration_report
from ._calibrators import (
    Calibrator,
    CalibratorKind,
    IsotonicCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
)
from ._clopper_pearson import select_risk_threshold
from ._data import LabelledSignals, Split, read_labelled_signals, split_rows, write_labelled_signals
from ._evaluation import PLAIN_THRESHOLD, calibration_metrics, evaluate_artifacts, markdown_report
from ._features import FeatureSpace, signal_values
from ._fitting import FitConfig, fit_artifact
from ._kinds import CALIBRATORS, make_calibrator
from ._learn_then_test import (
    binomial_p_value,
    count_grid,
    hoeffding_bentkus_p_value,
    learn_then_test_threshold,
    predicted_start,
    start_count,
    threshold_grid,
)
from ._monotone import PORTABLE_SIGNALS, MonotoneCalibrator
from ._risk_control import RISK_METHODS, RiskMethod, select_threshold
from ._scorer import (
    ConfidenceScorer,
    RequestVersions,
    ScoreResult,
    ThresholdStatus,
    default_artifact_path,
)
from ._sgr import sgr_threshold
from ._signals import PROBABILITY_FIELDS, SIGNAL_FIELDS, DebateOutcome, Signals
from ._threshold import (
    AcceptanceCurve,
    AcceptanceOutcome,
    Decision,
    RiskThreshold,
    acceptance_outcome,
    clopper_pearson_upper,
    decide,
    min_accepted_for,
)
from ._traffic import LabelledQuery, Traffic, TrafficSplit, read_traffic, split_traffic

__all__ = [
    "ARTIFACT_FORMAT",
    "CALIBRATORS",
    "CLASSES_FORMAT",
    "LEGACY_FORMAT",
    "PLAIN_THRESHOLD",
    "PORTABLE_SIGNALS",
    "PROBABILITY_FIELDS",
    "RISK_METHODS",
    "SIGNAL_FIELDS",
    "AcceptanceCurve",
    "AcceptanceOutcome",
    "AnswerClasses",
    "CalibrationBinding",
    "CalibrationConfig",
    "CalibrationResult",
    "Calibrator",
    "CalibratorArtifact",
    "CalibratorKind",
    "ClassRule",
    "ConfidenceScorer",
    "DebateOutcome",
    "Decision",
    "FeatureSpace",
    "FitConfig",
    "IsotonicCalibrator",
    "LabelledQuery",
    "LabelledSignals",
    "MonotoneCalibrator",
    "ObservedCandidate",
    "PlattCalibrator",
    "RequestVersions",
    "ReviewedLink",
    "RiskMethod",
    "RiskThreshold",
    "ScoreResult",
    "Signals",
    "Split",
    "TemperatureCalibrator",
    "ThresholdStatus",
    "Traffic",
    "TrafficSplit",
    "acceptance_outcome",
    "binomial_p_value",
    "calibrate",
    "calibration_markdown",
    "calibration_metrics",
    "candidate_links",
    "classes_from_links",
    "clopper_pearson_upper",
    "count_grid",
    "decide",
    "decisions",
    "default_artifact_path",
    "embedder_version",
    "evaluate_artifacts",
    "file_sha256",
    "fit_artifact",
    "hoeffding_bentkus_p_value",
    "json_ready",
    "learn_then_test_threshold",
    "make_calibrator",
    "markdown_report",
    "min_accepted_for",
    "predicted_start",
    "read_labelled_signals",
    "read_traffic",
    "recalibrate_command",
    "select_risk_threshold",
    "select_threshold",
    "sgr_threshold",
    "signal_values",
    "split_rows",
    "split_traffic",
    "start_count",
    "threshold_grid",
    "write_calibration_report",
    "write_labelled_signals",
]
