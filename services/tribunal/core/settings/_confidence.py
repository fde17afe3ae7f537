"""The confidence service: its calibrator artifact, the guarantee, the decisions."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field

from ._base import Section
from ._choices import DEFAULT_RISK_METHOD, CalibratorKind, RiskMethod
from ._deployment import DeploymentSettings

__all__ = ["ConfidenceSettings"]


class ConfidenceSettings(Section):
    """Knobs of the confidence service: its calibrator artifact, the guarantee, decisions."""

    artifact_path: Path | None = None
    """Calibrator artifact the service loads; null: ``data_dir/confidence/calibrator.json``
    when it exists, else the one shipped for the profile and its ``ensemble.matcher``
    (``tribunal/artifacts/<profile>/confidence/<matcher>-calibrator.json``)."""
    calibrator: CalibratorKind = "monotone"
    """Calibrator ``tribunal calibrate`` and ``tribunal confidence fit`` fit unless told
    otherwise (``monotone`` reads only KB-independent signals)."""
    method: RiskMethod = DEFAULT_RISK_METHOD
    """Risk control certifying each alpha's threshold in ``tribunal calibrate`` and
    ``tribunal confidence fit`` unless told otherwise."""
    score_signal: str = Field("ensemble_p_match", min_length=1)
    """Feature the isotonic/temperature calibrators read, and the raw score reports compare
    against (a Signals field, ``judge_p_yes.<judge>`` or ``extra.<name>``)."""
    alpha: float = Field(0.05, gt=0.0, lt=1.0)
    """Target hallucination rate P(wrong | accepted) the service enforces by default; the
    artifact must hold a threshold selected for it."""
    alphas: tuple[float, ...] = Field((0.05, 0.1, 0.2), min_length=1)
    """Rates ``calibrate`` and ``fit`` certify thresholds for (a request may pick any of
    them)."""
    delta: float = Field(0.1, gt=0.0, lt=1.0)
    """The guarantee holds with probability >= 1 - delta over the calibration data."""
    escalate_band: float = Field(0.0, ge=0.0, le=1.0)
    """Confidences this far below the threshold are ESCALATE instead of FALLBACK; 0: never."""
    plain_threshold: float | None = Field(None, ge=0.0, le=1.0)
    """Accept at this fixed confidence instead (no guarantee; responses report alpha 0)."""
    holdout_fraction: float = Field(0.3, gt=0.0, lt=1.0)
    """Share of the labelled rows (``calibrate``: of the queries, by group) kept out for
    evaluation."""
    risk_fraction: float = Field(0.7, gt=0.0, lt=1.0)
    """Share of the remaining rows that certify thresholds; the rest fit the calibrator
    (the monotone calibrator has at most nine parameters: a few dozen queries fit it,
    and every query left to certify tightens the bound)."""
    seed: int = Field(0, ge=0)
    """Seed of the split ``calibrate`` (grouped) and ``fit`` (stratified) make."""
    max_items_per_request: int = Field(1_000, ge=1, le=1_000_000)
    """Most items in one ``BatchScore``."""
    max_signals_per_item: int = Field(64, ge=1, le=10_000)
    """Most entries in each of an item's signal maps (``judge_p_yes``, ``extra``)."""
    deployment: DeploymentSettings = DeploymentSettings(num_cpus=0.25)
    """Ray Serve deployment options (arithmetic on a loaded artifact: a fraction of a CPU)."""
