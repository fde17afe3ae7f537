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
  ≥ 1 − δ, each test planned on items it never reads (:class:`Plan`): fixed-sequence
  Clopper–Pearson (:func:`select_risk_threshold`), Learn-then-Test
  (:func:`learn_then_test_threshold`), SGR; :func:`acceptance_outcome` for plain
  thresholds.
- :func:`fit_artifact` / :class:`CalibratorArtifact` — fit, save, load a
  versioned artifact; :func:`evaluate_artifacts` — held-out report.
- :func:`calibrate` — labelled traffic's candidate signals in, an artifact bound to
  the KB, matcher and embedder versions out (:class:`CalibrationBinding`), with a
  held-out report (:mod:`._calibrate`); :func:`queries_to_certify` — how many labelled
  queries would certify an α that is not (:mod:`._certify_size`).
- :class:`AnswerClasses` — a KB's answer-equivalence classes (several entries can
  answer one query), built by a rule plus a review, rerunnable.
- :class:`ConfidenceScorer` — what the service runs: signals → confidence,
  decision (ACCEPT / ESCALATE / FALLBACK), threshold, version, α.
"""

from ._answer_classes import AnswerClasses, ClassRule, ReviewedLink, candidate_links, file_sha256
from ._artifact import CalibratorArtifact, json_ready
from ._binding import CalibrationBinding, embedder_version
from ._calibrate import CalibrationConfig, ObservedCandidate, calibrate
from ._calibration_report import calibration_markdown, write_calibration_report
from ._calibrators import CalibratorKind
from ._certify_size import (
    CertifyEstimate,
    artifact_not_certified,
    certify_curve,
    not_certified_message,
    queries_to_certify,
)
from ._clopper_pearson import select_risk_threshold
from ._data import LabelledSignals, read_labelled_signals, split_rows, write_labelled_signals
from ._evaluation import evaluate_artifacts, markdown_report
from ._fitting import FitConfig, fit_artifact
from ._kinds import make_calibrator
from ._learn_then_test import (
    binomial_p_value,
    hoeffding_bentkus_p_value,
    learn_then_test_threshold,
    start_count,
    threshold_grid,
)
from ._risk_control import DEFAULT_RISK_METHOD, RISK_METHODS, Plan, RiskMethod, select_threshold
from ._scorer import (
    ConfidenceScorer,
    RequestVersions,
    ScoreResult,
    ThresholdStatus,
    default_artifact_path,
)
from ._served_scale import served_threshold
from ._signals import DebateOutcome, Signals
from ._threshold import clopper_pearson_upper
from ._traffic import LabelledQuery, Traffic, query_digest, read_traffic

__all__ = [
    "DEFAULT_RISK_METHOD",
    "RISK_METHODS",
    "AnswerClasses",
    "CalibrationBinding",
    "CalibrationConfig",
    "CalibratorArtifact",
    "CalibratorKind",
    "CertifyEstimate",
    "ClassRule",
    "ConfidenceScorer",
    "DebateOutcome",
    "FitConfig",
    "LabelledQuery",
    "LabelledSignals",
    "ObservedCandidate",
    "Plan",
    "RequestVersions",
    "ReviewedLink",
    "RiskMethod",
    "ScoreResult",
    "Signals",
    "ThresholdStatus",
    "Traffic",
    "artifact_not_certified",
    "binomial_p_value",
    "calibrate",
    "calibration_markdown",
    "candidate_links",
    "certify_curve",
    "clopper_pearson_upper",
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
    "not_certified_message",
    "queries_to_certify",
    "query_digest",
    "read_labelled_signals",
    "read_traffic",
    "select_risk_threshold",
    "select_threshold",
    "served_threshold",
    "split_rows",
    "start_count",
    "threshold_grid",
    "write_calibration_report",
    "write_labelled_signals",
]
