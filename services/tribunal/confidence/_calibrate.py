"""Calibrate on labelled traffic: candidate signals in, a certified, bound artifact out.

``tribunal calibrate`` runs the gateway's own stages on every labelled query and
hands this module what the gateway would send to the confidence service: each
candidate's entry id and :class:`Signals`, in the gateway's order. Then:

1. the queries are split at random, by query (:func:`split_traffic`), into a *fit*
   part, a *risk* part and a *held-out* part; queries marked ``fit_only`` (a tune's
   head part) join the fit part and never certify;
2. the calibrator is fitted on every candidate of the fit queries (label: the
   candidate's entry is one of the query's answers);
3. on each risk query the gateway's decision is replayed — the candidate with
   the highest confidence, right if its entry answers the query — and one
   threshold per α is certified on those decisions with the chosen
   risk-control method (the calibrator never saw them), which plans what it tests
   (grid, start) on the fit queries' decisions;
4. the held-out queries, used for nothing above, report what each threshold
   then does: accepted, wrong, coverage, and the whole hallucination-rate vs
   coverage curve.

The unit is the query, because the guarantee is about what users receive:
P(the answer returned is wrong | an answer is returned) ≤ α.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core import InvalidArgumentError
from ..core.settings import CalibratorKind, ConfidenceSettings, RiskMethod
from ._artifact import CalibratorArtifact
from ._binding import CalibrationBinding
from ._calibrators import Calibrator
from ._certify_size import certify_curve, estimate_from_artifact
from ._evaluation import calibration_metrics
from ._kinds import CALIBRATORS, make_calibrator
from ._risk_control import RISK_METHODS, select_threshold
from ._signals import Signals
from ._threshold import AcceptanceCurve, RiskThreshold, acceptance_outcome
from ._traffic import Traffic, TrafficSplit, split_traffic
from ._weighted import METHOD as WEIGHTED_METHOD
from ._weighted import weighted_threshold

__all__ = ["CalibrationConfig", "CalibrationResult", "ObservedCandidate", "calibrate", "decisions"]


@dataclass(frozen=True)
class ObservedCandidate:
    """One candidate as the gateway sends it to confidence."""

    entry_id: str
    signals: Signals


_DEFAULTS = ConfidenceSettings()
"""The ``confidence`` settings' defaults: the defaults of every field below."""


def _fit_fraction(risk_fraction: float) -> float:
    return round(1.0 - risk_fraction, 12)


@dataclass(frozen=True)
class CalibrationConfig:
    """How to calibrate; each default is the ``confidence`` setting's
    (:meth:`from_settings` takes a profile's)."""

    calibrator: CalibratorKind = _DEFAULTS.calibrator
    """Calibrator kind (``monotone`` reads only KB-independent signals)."""
    signals: tuple[str, ...] | None = None
    """Columns of the monotone calibrator (default: :data:`PORTABLE_SIGNALS`)."""
    score: str | None = None
    """The one column an isotonic or temperature calibrator reads."""
    alphas: tuple[float, ...] = _DEFAULTS.alphas
    """Target hallucination rates, one certified threshold each."""
    delta: float = _DEFAULTS.delta
    """Each guarantee holds with probability ≥ 1 − δ."""
    method: RiskMethod = _DEFAULTS.method
    """Risk-control method (``RISK_METHODS``)."""
    holdout_fraction: float = _DEFAULTS.holdout_fraction
    """Share of the queries (by group) held out for the report."""
    fit_fraction: float = _fit_fraction(_DEFAULTS.risk_fraction)
    """Share of the remaining queries (by group) that fit the calibrator; the rest certify
    (``1 - confidence.risk_fraction``)."""
    seed: int = _DEFAULTS.seed
    """Seed of the grouped split."""

    @classmethod
    def from_settings(cls, settings: ConfidenceSettings, **given: Any) -> CalibrationConfig:
        """The settings' choices, overridden by each ``given`` value that is not None."""
        defaults: dict[str, Any] = {
            "calibrator": settings.calibrator,
            "alphas": settings.alphas,
            "delta": settings.delta,
            "method": settings.method,
            "holdout_fraction": settings.holdout_fraction,
            "fit_fraction": _fit_fraction(settings.risk_fraction),
            "seed": settings.seed,
        }
        return cls(**{**defaults, **{k: v for k, v in given.items() if v is not None}})

    def __post_init__(self) -> None:
        if self.calibrator not in CALIBRATORS:
            raise InvalidArgumentError(
                f"unknown calibrator {self.calibrator!r}; choose one of {', '.join(CALIBRATORS)}",
                field="calibrator",
            )
        if self.method not in RISK_METHODS:
            raise InvalidArgumentError(
                f"unknown risk-control method {self.method!r}; "
                f"choose one of {', '.join(RISK_METHODS)}",
                field="method",
            )
        if not self.alphas:
            raise InvalidArgumentError("give at least one alpha", field="alpha")
        for name, value in (*(("alpha", a) for a in self.alphas), ("delta", self.delta)):
            if not 0.0 < value < 1.0:
                raise InvalidArgumentError(f"{name} must be in (0, 1), got {value}", field=name)
        object.__setattr__(self, "alphas", tuple(sorted({float(a) for a in self.alphas})))
        if self.signals is not None:
            object.__setattr__(self, "signals", tuple(self.signals))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["alphas"] = list(self.alphas)
        data["signals"] = None if self.signals is None else list(self.signals)
        data["unit"] = "query: the highest-confidence candidate, as the gateway decides"
        data["split_unit"] = (
            "query (repeats of one text and rows of one explicit group together; "
            "fit_only rows fit the calibrator only)"
        )
        return data


def decisions(
    calibrator: Calibrator,
    traffic: Traffic,
    observed: Sequence[Sequence[ObservedCandidate]],
    rows: NDArray[np.int64],
) -> tuple[NDArray[np.float64], NDArray[np.int64], list[str]]:
    """The gateway's decision on each query in ``rows``: the best candidate's confidence,
    1 if its entry answers the query, and its entry id.

    A query without candidates (retrieval found nothing) can never be accepted: it
    gets confidence 0 and counts as wrong, which no threshold above 0 accepts.
    """
    confidence = np.zeros(rows.size)
    right = np.zeros(rows.size, dtype=np.int64)
    chosen: list[str] = []
    for position, row in enumerate(rows):
        candidates = observed[int(row)]
        if not candidates:
            chosen.append("")
            continue
        scores = calibrator.predict([c.signals for c in candidates])
        best = int(np.argmax(scores))  # the first of equal maxima, as the gateway picks
        confidence[position] = float(scores[best])
        entry = candidates[best].entry_id
        right[position] = int(traffic.queries[int(row)].is_right(entry))
        chosen.append(entry)
    return confidence, right, chosen


def _candidate_rows(
    traffic: Traffic, observed: Sequence[Sequence[ObservedCandidate]], rows: NDArray[np.int64]
) -> tuple[list[Signals], NDArray[np.int64]]:
    signals: list[Signals] = []
    labels: list[int] = []
    for row in rows:
        query = traffic.queries[int(row)]
        for candidate in observed[int(row)]:
            signals.append(candidate.signals)
            labels.append(int(query.is_right(candidate.entry_id)))
    return signals, np.asarray(labels, dtype=np.int64)


def _curve(confidence: NDArray[np.float64], right: NDArray[np.int64]) -> dict[str, list[float]]:
    """Hallucination rate and coverage at every distinct confidence, highest first."""
    if not confidence.size:
        return {"threshold": [], "coverage": [], "hallucination": []}
    curve = AcceptanceCurve.of(confidence, right)
    return {
        "threshold": [float(t) for t in curve.thresholds],
        "coverage": [float(a) / curve.n for a in curve.accepted],
        "hallucination": [
            float(e) / float(a) for e, a in zip(curve.errors, curve.accepted, strict=True)
        ],
    }


def _reference(
    calibrator: Calibrator,
    observed: Sequence[Sequence[ObservedCandidate]],
    rows: NDArray[np.int64],
) -> dict[str, list[float]]:
    """The live shift test's baseline, on the queries the calibrator was not fitted on:
    per query with candidates, the served (best) confidence and the top-1 similarity
    (the highest dense cosine among its candidates) — what the gateway audits."""
    confidence: list[float] = []
    similarity: list[float] = []
    for row in sorted(int(r) for r in rows):
        candidates = observed[row]
        if not candidates:
            continue
        scores = calibrator.predict([c.signals for c in candidates])
        confidence.append(round(float(np.max(scores)), 6))
        dense = [c.signals.dense_score for c in candidates if c.signals.dense_score is not None]
        if dense:
            similarity.append(round(float(max(dense)), 6))
    return {"confidence": confidence, "top1_similarity": similarity}


def _certify(
    traffic: Traffic,
    split: TrafficSplit,
    risk: tuple[NDArray[np.float64], NDArray[np.int64]],
    plan: tuple[NDArray[np.float64], NDArray[np.int64]],
    *,
    alpha: float,
    config: CalibrationConfig,
) -> RiskThreshold:
    """One α's threshold: the configured method, or — on traffic drawn with unequal
    inclusion probabilities (weighted rows) — the inverse-probability-weighted test."""
    if not traffic.weighted:
        return select_threshold(
            *risk, alpha=alpha, delta=config.delta, method=config.method, plan=plan
        )
    weights = np.asarray([q.weight for q in traffic.queries], dtype=np.float64)
    return weighted_threshold(
        *risk,
        weights[split.risk],
        alpha=alpha,
        delta=config.delta,
        plan=(*plan, weights[split.fit]),
    )


@dataclass(frozen=True)
class CalibrationResult:
    """The artifact and what the held-out queries say about it."""

    artifact: CalibratorArtifact
    report: dict[str, Any]
    """Split sizes, per-α certified bound and coverage with held-out outcome, curves."""
    heldout_confidence: NDArray[np.float64] = field(repr=False)
    heldout_right: NDArray[np.int64] = field(repr=False)


def calibrate(
    traffic: Traffic,
    observed: Sequence[Sequence[ObservedCandidate]],
    config: CalibrationConfig,
    binding: CalibrationBinding,
    *,
    created: str | None = None,
    labelled_queries: int | None = None,
) -> CalibrationResult:
    """Fit, certify and report (see the module docstring).

    ``labelled_queries``: the labelled queries ``traffic`` was drawn from, when a tune kept
    some of them (recorded, so an α not certified can be told how many more would do).

    Raises:
        InvalidArgumentError: ``observed`` does not have one list per query, or a part
            of the split lacks right or wrong candidates to fit on.
    """
    if len(observed) != len(traffic):
        raise InvalidArgumentError(
            f"{len(observed)} observed candidate lists for {len(traffic)} queries",
            field="traffic",
        )
    split = split_traffic(
        traffic.queries,
        holdout_fraction=config.holdout_fraction,
        fit_fraction=config.fit_fraction,
        seed=config.seed,
    )
    fit_signals, fit_labels = _candidate_rows(traffic, observed, split.fit)
    if not fit_signals:
        raise InvalidArgumentError("the fit queries have no candidates", field="traffic")
    calibrator = make_calibrator(config.calibrator, score=config.score, signals=config.signals)
    calibrator.fit(fit_signals, fit_labels)

    risk_conf, risk_right, _ = decisions(calibrator, traffic, observed, split.risk)
    # The risk-control test is planned (grid, start) on the fit queries' decisions: items
    # it never reads, so what it tests is fixed before the certify labels are read.
    plan_conf, plan_right, _ = decisions(calibrator, traffic, observed, split.fit)
    thresholds = tuple(
        _certify(
            traffic,
            split,
            (risk_conf, risk_right),
            (plan_conf, plan_right),
            alpha=alpha,
            config=config,
        )
        for alpha in config.alphas
    )
    held_conf, held_right, _ = decisions(calibrator, traffic, observed, split.holdout)
    per_alpha = []
    for threshold in thresholds:
        outcome = acceptance_outcome(held_conf, held_right, threshold.threshold)
        per_alpha.append(
            {
                **threshold.to_dict(),
                "certified": threshold.certified,
                "heldout": outcome.to_dict(),
            }
        )
    answerable = {
        name: int(sum(1 for i in getattr(split, name) if traffic.queries[int(i)].answers))
        for name in ("fit", "risk", "holdout")
    }
    training_data: Mapping[str, Any] = {
        "source": traffic.source,
        "sha256": traffic.sha256,
        "queries": len(traffic),
        "answerable": traffic.answerable,
        "groups": len({q.group for q in traffic.queries}),
        "split": split.sizes(),
        "fit_only": sum(1 for q in traffic.queries if q.fit_only),
        "split_answerable": answerable,
        "fit_candidates": len(fit_signals),
        "fit_right_candidates": int(fit_labels.sum()),
        "weighted": traffic.weighted,
    }
    if labelled_queries is not None and labelled_queries != len(traffic):
        training_data = {**training_data, "labelled_queries": int(labelled_queries)}
    metrics: dict[str, Any] = {
        "risk_split": calibration_metrics(risk_right, risk_conf) if risk_right.size else {},
        # What an α not certified would need (tribunal.confidence._certify_size).
        "certify_curve": certify_curve(risk_conf, risk_right) if risk_right.size else {},
        "heldout": {
            "queries": int(split.holdout.size),
            "decided_right": int(held_right.sum()),
            "calibration": calibration_metrics(held_right, held_conf) if held_right.size else {},
            "per_alpha": [{"alpha": item["alpha"], **item["heldout"]} for item in per_alpha],
        },
    }
    extra: dict[str, Any] = {} if created is None else {"created": created}
    artifact = CalibratorArtifact(
        reference=_reference(calibrator, observed, np.concatenate([split.risk, split.holdout])),
        calibrator=calibrator,
        thresholds=thresholds,
        config=config.to_dict(),
        training_data=training_data,
        metrics=metrics,
        binding=binding,
        **extra,
    )
    for item, threshold in zip(per_alpha, thresholds, strict=True):
        # The estimate reads the unweighted certify curve: none for a weighted threshold.
        if not threshold.certified and threshold.method != WEIGHTED_METHOD:
            estimate = estimate_from_artifact(
                metrics,
                training_data,
                alpha=threshold.alpha,
                delta=threshold.delta,
                method=threshold.method,
            )
            item["to_certify"] = None if estimate is None else estimate.to_dict()
    report = {
        "artifact": {"version": artifact.version, "binding": binding.to_dict()},
        "config": config.to_dict(),
        "traffic": dict(training_data),
        "per_alpha": per_alpha,
        "heldout_metrics": metrics["heldout"]["calibration"],
        "risk_metrics": metrics["risk_split"],
        "curves": {
            "heldout": _curve(held_conf, held_right),
            "risk": _curve(risk_conf, risk_right),
        },
    }
    return CalibrationResult(artifact, report, held_conf, held_right)
