"""Every named choice a setting, a command-line option and the code share: defined once.

Each is a ``Literal`` (the settings' field type, so a profile or ``TRIBUNAL_*`` value
outside it is refused when the settings load) and a tuple of its values (the commands'
``choices=``, the code's registries, which check at import that they cover it). Nothing
here imports more than the standard library, so a command builds its parser without the
numeric stack.
"""

from __future__ import annotations

from typing import Literal, get_args

__all__ = [
    "AGGREGATOR_NAMES",
    "CALIBRATOR_KINDS",
    "DEFAULT_RISK_METHOD",
    "LABEL_MODES",
    "PLAN_CALIBRATOR_KINDS",
    "RISK_METHOD_NAMES",
    "AggregatorName",
    "CalibratorKind",
    "LabelModeName",
    "PlanCalibratorKind",
    "RiskMethod",
]

CalibratorKind = Literal["platt", "isotonic", "temperature", "monotone"]
"""Calibrators of confidence (``tribunal.confidence``): logistic on every signal, isotonic
or temperature on one score, logistic with non-negative weights on KB-independent ones."""
CALIBRATOR_KINDS: tuple[CalibratorKind, ...] = get_args(CalibratorKind)

RiskMethod = Literal["clopper-pearson", "ltt", "ltt-hb", "sgr"]
"""Risk control certifying a threshold: fixed-sequence Clopper–Pearson, Learn-then-Test
(binomial or Hoeffding–Bentkus p-values), selective-guaranteed risk."""
RISK_METHOD_NAMES: tuple[RiskMethod, ...] = get_args(RiskMethod)
DEFAULT_RISK_METHOD: RiskMethod = "clopper-pearson"
"""The method ``confidence.method``, ``tribunal calibrate``, ``tribunal confidence fit`` and
``select_threshold`` use unless told otherwise: the one certifying the most coverage across
domains at α ∈ {0.05, 0.1, 0.2} (``tribunal-lab eval risk-methods``; docs/results/confidence.md)."""

LabelModeName = Literal["cascade", "debate", "judge"]
"""How ``Label`` decides (``tribunal.gateway.LabelMode``)."""
LABEL_MODES: tuple[LabelModeName, ...] = get_args(LabelModeName)

AggregatorName = Literal["majority", "weighted", "neural", "latent"]
"""How the ensemble combines its judges' votes (``tribunal.ensemble``)."""
AGGREGATOR_NAMES: tuple[AggregatorName, ...] = get_args(AggregatorName)

PlanCalibratorKind = Literal["platt", "isotonic"]
"""Calibration of the relevance judge's P in a label plan (``tribunal label plan``)."""
PLAN_CALIBRATOR_KINDS: tuple[PlanCalibratorKind, ...] = get_args(PlanCalibratorKind)
