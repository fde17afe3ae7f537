"""The versioned calibrator artifact: one JSON file the service loads.

It holds the calibrator's type, hyperparameters and fitted parameters, the
feature space, the thresholds selected per α (with the risk-control method that
selected each), what the calibration is bound to (collection version, matcher,
embedder, profile; absent for artifacts fitted from a signals file), the fit
configuration, the training data's hash and split sizes, the fit-time metrics
and the creation time. Its version (``platt-3f2a9c0d1b7e``) is derived from everything but the
creation time, so the same fit on the same data gives the same version, and a
file edited by hand no longer matches its version and is refused.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core import FailedPreconditionError, InvalidArgumentError, NotFoundError
from ._binding import CalibrationBinding
from ._calibrators import Calibrator
from ._features import FeatureSpace
from ._kinds import CALIBRATORS
from ._signals import Signals
from ._threshold import RiskThreshold

__all__ = ["ARTIFACT_FORMAT", "CalibratorArtifact", "json_ready"]

ARTIFACT_FORMAT = "tribunal.confidence.calibrator/2"
LEGACY_FORMAT = "tribunal.confidence.calibrator/1"
"""Read-only: no binding, every threshold from the Clopper–Pearson scan."""


def json_ready(value: Any) -> Any:
    """Replace non-finite floats (an undefined AUROC) by None, recursively, for strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): json_ready(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_ready(v) for v in value]
    if isinstance(value, np.floating | np.integer):
        return json_ready(value.item())
    return value


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class CalibratorArtifact:
    """A fitted calibrator with its thresholds and provenance."""

    calibrator: Calibrator
    """The fitted calibrator."""
    thresholds: tuple[RiskThreshold, ...]
    """One per target α, selected on the risk split."""
    config: Mapping[str, Any]
    """How it was fitted (calibrator, score, alphas, δ, fractions, seed)."""
    training_data: Mapping[str, Any]
    """The data: source, sha256, rows, split sizes."""
    metrics: Mapping[str, Any] = field(default_factory=dict)
    """Fit-time metrics on the risk split."""
    created: str = field(default_factory=_now)
    """UTC creation time (ISO 8601); not part of the version."""
    binding: CalibrationBinding | None = None
    """What the calibration is bound to; None for a fit from a signals file (unbound)."""
    format: str = ARTIFACT_FORMAT
    """:data:`ARTIFACT_FORMAT`, or :data:`LEGACY_FORMAT` for an older file read back."""
    reference: Mapping[str, Sequence[float]] = field(default_factory=dict)
    """A sample of the calibration traffic's signals (per query not used in fitting: the
    served confidence, the top-1 similarity), the baseline the live shift test compares
    with; empty for artifacts fitted before it was kept (part of the version when set)."""

    def content(self) -> dict[str, Any]:
        """Everything the version is derived from."""
        legacy = self.format == LEGACY_FORMAT
        thresholds = [t.to_dict() for t in self.thresholds]
        if legacy:
            thresholds = [{k: v for k, v in t.items() if k != "method"} for t in thresholds]
        document: dict[str, Any] = {
            "format": self.format,
            "calibrator": {
                "type": self.calibrator.kind,
                "hyperparameters": self.calibrator.hyperparameters(),
                "parameters": self.calibrator.state(),
            },
            "features": self.calibrator.space_.to_dict(),
            "thresholds": thresholds,
            "config": dict(self.config),
            "training_data": dict(self.training_data),
            "metrics": dict(self.metrics),
        }
        if not legacy:
            document["binding"] = None if self.binding is None else self.binding.to_dict()
        if self.reference:
            document["reference"] = {k: list(v) for k, v in sorted(self.reference.items())}
        content: dict[str, Any] = json_ready(document)
        return content

    @cached_property
    def version(self) -> str:
        """``<type>-<12 hex of the content's sha256>`` (computed once; the artifact is frozen)."""
        canonical = json.dumps(self.content(), sort_keys=True, separators=(",", ":"))
        return f"{self.calibrator.kind}-{hashlib.sha256(canonical.encode()).hexdigest()[:12]}"

    @property
    def alphas(self) -> tuple[float, ...]:
        return tuple(t.alpha for t in self.thresholds)

    def threshold_for(self, alpha: float) -> RiskThreshold:
        """The threshold selected for ``alpha``.

        Raises:
            InvalidArgumentError: no threshold was selected for that α.
        """
        for threshold in self.thresholds:
            if math.isclose(threshold.alpha, alpha, rel_tol=1e-9, abs_tol=1e-12):
                return threshold
        raise InvalidArgumentError(
            f"calibrator {self.version} has no threshold selected for alpha={alpha}; "
            f"it has {', '.join(str(a) for a in self.alphas)} (refit with --alpha to add one)",
            field="alpha",
        )

    def predict(self, signals: Sequence[Signals]) -> NDArray[np.float64]:
        """Calibrated confidences."""
        return self.calibrator.predict(signals)

    def save(self, path: Path) -> Path:
        """Write the artifact as indented JSON (written to a temp file, then renamed)."""
        document = {"version": self.version, "created": self.created, **self.content()}
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(document, indent=2, sort_keys=True, allow_nan=False) + "\n")
        partial.replace(path)
        return path

    @classmethod
    def load(cls, path: Path) -> CalibratorArtifact:
        """Read and check an artifact.

        Raises:
            NotFoundError: no file at ``path``.
            FailedPreconditionError: not an artifact of this format, or its content
                does not match its version (edited or truncated).
        """
        if not path.is_file():
            raise NotFoundError(
                f"calibrator artifact {path} does not exist; create it with "
                "`tribunal calibrate` from labelled traffic, or `tribunal confidence fit` from a "
                "signals file (or set confidence.artifact_path)"
            )
        try:
            document = json.loads(path.read_text())
            if document.get("format") not in (ARTIFACT_FORMAT, LEGACY_FORMAT):
                raise FailedPreconditionError(
                    f"{path} is not a {ARTIFACT_FORMAT} artifact "
                    f"(format {document.get('format')!r})"
                )
            kind = document["calibrator"]["type"]
            if kind not in CALIBRATORS:
                raise FailedPreconditionError(f"{path}: unknown calibrator type {kind!r}")
            space = FeatureSpace.from_dict(document["features"])
            calibrator = CALIBRATORS[kind].restore(
                document["calibrator"]["hyperparameters"],
                document["calibrator"]["parameters"],
                space,
            )
            artifact = cls(
                calibrator=calibrator,
                thresholds=tuple(RiskThreshold.from_dict(t) for t in document["thresholds"]),
                config=document["config"],
                training_data=document["training_data"],
                metrics=document["metrics"],
                created=document["created"],
                binding=(
                    CalibrationBinding.from_dict(document["binding"])
                    if document.get("binding")
                    else None
                ),
                format=document["format"],
                reference={
                    str(k): tuple(float(x) for x in v)
                    for k, v in (document.get("reference") or {}).items()
                },
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FailedPreconditionError(
                f"{path} is not a valid calibrator artifact: {exc!r}"
            ) from None
        split = artifact.training_data.get("split", {})
        if hasattr(calibrator, "fit_rows_hint_") and isinstance(split.get("fit"), int):
            # Older Platt artifacts do not record their fit rows: the split sizes do.
            calibrator.fit_rows_hint_ = split["fit"]
        if artifact.version != document.get("version"):
            raise FailedPreconditionError(
                f"{path}: content does not match its version {document.get('version')!r} "
                f"(it hashes to {artifact.version}); refit instead of editing the file"
            )
        return artifact
