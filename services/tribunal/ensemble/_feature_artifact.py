"""The feature matcher's artifact: a logistic regression over cheap matching features.

A JSON file, ``tribunal.match-features/1``::

    {"format": "tribunal.match-features/1", "version": "mf-…",
     "embedder": {"model_key": "embedder_large", "name": "all-mpnet-base-v2"},
     "features": ["cos_question", "cos_answer", "cos_question_answer", "token_set"],
     "mean": [...], "std": [...], "coef": [...], "intercept": -0.4,
     "threshold": 0.497, "fitted_on": {...}, "metrics": {...}}

``p_match = sigmoid(intercept + Σ coef_i · (x_i − mean_i) / std_i)`` over the
:data:`~tribunal.ensemble.MATCH_FEATURES` named in ``features``; ``match`` is
``p_match ≥ threshold``. ``tribunal-lab eval matching-features --artifact F`` writes it (the
regression and threshold fitted on the selection half, the test half's figures in
``metrics``). The version is a hash of everything else, checked on load, so two
artifacts with one version predict the same.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..core import ConfigError, FailedPreconditionError, resolve_artifact
from ._match_features import MATCH_FEATURES

if TYPE_CHECKING:
    from ..core import Settings

__all__ = ["MATCH_FEATURES_FORMAT", "FeatureEmbedder", "MatchFeaturesArtifact", "features_path"]

MATCH_FEATURES_FORMAT = "tribunal.match-features/1"
_FIELD = "ensemble.features_artifact"


class FeatureEmbedder(BaseModel):
    """The embedder the cosines were computed with; the service must load the same."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    model_key: str = Field(min_length=1)
    """A model of the profile (``embedder_large``)."""
    name: str = Field(min_length=1)
    """Its artifact name (``all-mpnet-base-v2``), checked against the loaded embedder."""


class MatchFeaturesArtifact(BaseModel):
    """A fitted matching regression; every check failure names the field to fix."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    format: Literal["tribunal.match-features/1"] = "tribunal.match-features/1"
    version: str = ""
    """``mf-`` + a hash of the rest; "" until :meth:`sealed`."""
    embedder: FeatureEmbedder
    features: tuple[str, ...] = Field(min_length=1)
    mean: tuple[float, ...]
    """Standardisation: each feature's selection mean ..."""
    std: tuple[float, ...]
    """... and standard deviation (> 0)."""
    coef: tuple[float, ...]
    intercept: float
    threshold: float = Field(ge=0.0, le=1.0)
    """P(match) at or above which the matcher votes match (the max-accuracy cut on
    selection); the gateway's accept decision is the confidence service's, not this."""
    fitted_on: dict[str, Any] = Field(default_factory=dict)
    metrics: dict[str, Any] = Field(default_factory=dict)

    @field_validator("features")
    @classmethod
    def _known_features(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        unknown = [f for f in value if f not in MATCH_FEATURES]
        if unknown:
            raise ValueError(f"unknown features {unknown}; known: {', '.join(MATCH_FEATURES)}")
        if len(set(value)) != len(value):
            raise ValueError("features must be unique")
        return value

    @model_validator(mode="after")
    def _shapes(self) -> MatchFeaturesArtifact:
        n = len(self.features)
        for name in ("mean", "std", "coef"):
            values = getattr(self, name)
            if len(values) != n:
                raise ValueError(f"{name} has {len(values)} values for {n} features")
            if not all(math.isfinite(v) for v in values):
                raise ValueError(f"{name} must be finite numbers")
        if not all(s > 0 for s in self.std):
            raise ValueError("std must be > 0 (a constant feature: drop it)")
        if not math.isfinite(self.intercept):
            raise ValueError("intercept must be a finite number")
        return self

    def _digest(self) -> str:
        content = self.model_dump(mode="json", exclude={"version"})
        text = json.dumps(content, sort_keys=True)
        return "mf-" + hashlib.sha256(text.encode()).hexdigest()[:12]

    def sealed(self) -> MatchFeaturesArtifact:
        """This artifact with its version set from its contents."""
        return self.model_copy(update={"version": self._digest()})

    def p_match(self, values: dict[str, NDArray[np.float64]]) -> NDArray[np.float64]:
        """P(match) per row of ``values`` (feature name -> one value per pair)."""
        x = np.column_stack([values[name] for name in self.features])
        z = self.intercept + ((x - np.asarray(self.mean)) / np.asarray(self.std)) @ np.asarray(
            self.coef
        )
        # exp(-z) overflows for very negative z: a float warning, and 0.0 is the right answer.
        with np.errstate(over="ignore"):
            p: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-z))
        return p

    @classmethod
    def load(cls, path: Path) -> MatchFeaturesArtifact:
        """Read and validate ``path``.

        Raises:
            FailedPreconditionError: no file there, or its contents do not match its
                version (modified or damaged).
            ConfigError: not a valid ``tribunal.match-features/1`` file.
        """
        if not path.is_file():
            raise FailedPreconditionError(
                f"no feature-matcher artifact at {path}: fit one with `tribunal-lab eval "
                "matching-features --artifact PATH` or set ensemble.features_artifact",
                field=_FIELD,
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ConfigError(f"{path}: not readable JSON: {exc}", field=_FIELD) from None
        try:
            artifact = cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(top)'}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigError(f"{path}: {problems}", field=_FIELD) from None
        if artifact.version != artifact._digest():
            raise FailedPreconditionError(
                f"{path}: contents do not match version {artifact.version!r} (recomputed "
                f"{artifact._digest()}); the artifact was modified or damaged",
                field=_FIELD,
            )
        return artifact

    def save(self, path: Path) -> MatchFeaturesArtifact:
        """Write the sealed artifact to ``path``; returns it."""
        sealed = self.sealed()
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(sealed.model_dump(mode="json"), indent=2) + "\n"
        path.write_text(text, encoding="utf-8")
        return sealed


def features_path(settings: Settings) -> Path:
    """Configured, else ``data_dir/ensemble/match-features.json`` if it exists, else the
    one shipped for the profile; when none exists, the data_dir path (to name in errors)."""
    return resolve_artifact(
        settings, settings.ensemble.features_artifact, "ensemble/match-features.json"
    )
