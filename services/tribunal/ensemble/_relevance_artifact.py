"""The relevance judge's artifact: a fitted logistic regression, ``tribunal.relevance/1``.

A JSON file::

    {"format": "tribunal.relevance/1", "version": "rel-…",
     "features": [{"name": "llm_strong/yesno", "kind": "llm_p_yes",
                   "model_key": "llm_strong", "prompt_id": "relevance/yesno@1"},
                  {"name": "embedder/cosine", "kind": "cosine", "model_key": "embedder"}],
     "coef": [1.2, 3.4], "intercept": -1.0, "threshold": 0.45,
     "band": {"low": 0.30, "high": 0.60}, "backend": "transformers",
     "fitted_on": {...}, "metrics": {...}}

``p_relevant = sigmoid(intercept + Σ coef_i · x_i)``, x = logit(clip(P(yes), 1e-6,
1 - 1e-6)) for ``llm_p_yes`` and the raw cosine in [-1, 1] for ``cosine``. Judge
only: relevant when p >= threshold; cascade: relevant when p >= band.high,
irrelevant when p <= band.low, the debate in between (0 <= low <= high <= 1;
low == high sends nothing to the debate). The threshold and the band are chosen
separately on the selection split (max balanced accuracy of all items vs of the kept
ones), so the threshold need not lie inside the band. Every check failure is a
:class:`ConfigError` that says what to fix.

Every decision point is on one scale, the calibrated probability ``p_relevant``: the
threshold, the band, and any band the figures under ``metrics`` name (``metrics.cascade.band``
must equal ``band``, so the figures describe the band the judge applies).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from ..core import ConfigError, TribunalError, shipped_artifact

if TYPE_CHECKING:
    from ..core import Settings
    from ..core.llm import Backend

__all__ = ["RELEVANCE_FORMAT", "RelevanceArtifact", "RelevanceFeature", "relevance_artifact_path"]

RELEVANCE_FORMAT = "tribunal.relevance/1"
FeatureKind = Literal["llm_p_yes", "cosine"]
_KINDS: dict[str, str] = {"llm_p_yes": "llm", "cosine": "embedder"}
"""Feature kind -> the kind of profile model it needs."""
_BACKENDS = ("transformers", "llamacpp", "openai")
_P_CLIP = 1e-6
"""As the sweep's ``logit`` (evaluation._sweep_stats): the served p equals the fitted one."""
_KEYS = {
    "format",
    "version",
    "features",
    "coef",
    "intercept",
    "threshold",
    "band",
    "backend",
    "fitted_on",
    "metrics",
}
_FIELD = "ensemble.relevance_artifact"


def _fail(source: str, message: str) -> ConfigError:
    return ConfigError(f"relevance artifact {source}: {message}", field=_FIELD)


def _number(value: Any, what: str, source: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _fail(source, f"{what} must be a finite number, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class RelevanceFeature:
    """One input of the regression: what computes it, and from which model."""

    name: str
    kind: FeatureKind
    model_key: str
    """A model of the profile (``llm_strong``, ``embedder``)."""
    prompt_id: str | None = None
    """``llm_p_yes`` only: the versioned prompt id, e.g. ``relevance/yesno@1``."""

    def to_dict(self) -> dict[str, str]:
        out = {"name": self.name, "kind": self.kind, "model_key": self.model_key}
        if self.prompt_id is not None:
            out["prompt_id"] = self.prompt_id
        return out


def _feature(raw: Any, index: int, source: str) -> RelevanceFeature:
    from ..prompts import get_prompt

    where = f"features[{index}]"
    if not isinstance(raw, Mapping):
        raise _fail(source, f"{where} must be an object with name, kind, model_key")
    unknown = sorted(set(raw) - {"name", "kind", "model_key", "prompt_id"})
    if unknown:
        raise _fail(
            source, f"{where} has unknown keys {unknown} (name, kind, model_key, prompt_id)"
        )
    name, kind, model_key = raw.get("name"), raw.get("kind"), raw.get("model_key")
    if not isinstance(name, str) or not name.strip():
        raise _fail(source, f"{where}.name must be a non-empty string")
    if kind not in _KINDS:
        raise _fail(source, f"{where}.kind is {kind!r}; known kinds: {', '.join(_KINDS)}")
    if not isinstance(model_key, str) or not model_key.strip():
        raise _fail(source, f"{where}.model_key must name a model of the profile")
    prompt_id = raw.get("prompt_id")
    if kind == "llm_p_yes":
        if not isinstance(prompt_id, str):
            raise _fail(source, f"{where} (llm_p_yes) needs a prompt_id, e.g. relevance/yesno@1")
        try:
            template = get_prompt(prompt_id)
        except TribunalError as exc:
            raise _fail(source, f"{where}.prompt_id: {exc}") from None
        if template.id != prompt_id:
            raise _fail(
                source, f"{where}.prompt_id {prompt_id!r} must name a version: {template.id!r}"
            )
        extra = sorted(set(template.fields) - {"query", "passage"})
        if extra:
            raise _fail(
                source,
                f"{where}.prompt_id {prompt_id} needs fields {extra}; a relevance feature "
                "fills only query and passage",
            )
    elif prompt_id is not None:
        raise _fail(source, f"{where} is a cosine feature: remove its prompt_id")
    return RelevanceFeature(name, cast(FeatureKind, kind), model_key, prompt_id)


@dataclass(frozen=True)
class RelevanceArtifact:
    """A fitted relevance regression and its decision points; validated on construction."""

    version: str
    features: tuple[RelevanceFeature, ...]
    coef: tuple[float, ...]
    intercept: float
    threshold: float
    band_low: float
    band_high: float
    backend: Backend | None = None
    """LLM backend the features were fitted with (P(yes) differs by backend); None: the
    profile's ``llm_backend``."""
    fitted_on: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Built in code or from a file: both go through the same checks.
        RelevanceArtifact.from_dict(self.to_dict(), source="(in memory)")

    @classmethod
    def from_dict(cls, data: Any, *, source: str = "(in memory)") -> RelevanceArtifact:
        """Parse and validate; every problem is a :class:`ConfigError` saying what to fix."""
        if not isinstance(data, Mapping):
            raise _fail(source, "must be a JSON object")
        if data.get("format") != RELEVANCE_FORMAT:
            raise _fail(
                source, f"format is {data.get('format')!r}; this build reads {RELEVANCE_FORMAT!r}"
            )
        unknown = sorted(set(data) - _KEYS)
        if unknown:
            raise _fail(source, f"unknown keys {unknown}; known: {', '.join(sorted(_KEYS))}")
        version = data.get("version")
        if not isinstance(version, str) or not version.strip():
            raise _fail(source, "version must be a non-empty string (a short id)")
        raw_features = data.get("features")
        if not isinstance(raw_features, list) or not raw_features:
            raise _fail(source, "features must be a non-empty list")
        features = tuple(_feature(raw, i, source) for i, raw in enumerate(raw_features))
        names = [f.name for f in features]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise _fail(source, f"feature names must be unique; repeated: {duplicated}")
        coef = data.get("coef")
        if not isinstance(coef, list) or len(coef) != len(features):
            count = len(coef) if isinstance(coef, list) else coef
            raise _fail(source, f"coef has {count} values for {len(features)} features")
        weights = tuple(_number(c, f"coef[{i}]", source) for i, c in enumerate(coef))
        intercept = _number(data.get("intercept"), "intercept", source)
        threshold, low, high = _decision_points(data, source)
        backend = data.get("backend")
        if backend is not None and backend not in _BACKENDS:
            raise _fail(source, f"backend is {backend!r}; known: {', '.join(_BACKENDS)} or null")
        fitted_on, metrics = data.get("fitted_on", {}), data.get("metrics", {})
        if not isinstance(fitted_on, Mapping) or not isinstance(metrics, Mapping):
            raise _fail(source, "fitted_on and metrics must be JSON objects")
        _check_metrics_band(metrics, low, high, source)
        artifact = object.__new__(cls)  # validated above: skip __post_init__'s re-check
        for key, value in (
            ("version", version),
            ("features", features),
            ("coef", weights),
            ("intercept", intercept),
            ("threshold", threshold),
            ("band_low", low),
            ("band_high", high),
            ("backend", backend),
            ("fitted_on", dict(fitted_on)),
            ("metrics", dict(metrics)),
        ):
            object.__setattr__(artifact, key, value)
        return artifact

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": RELEVANCE_FORMAT,
            "version": self.version,
            "features": [f.to_dict() for f in self.features],
            "coef": list(self.coef),
            "intercept": self.intercept,
            "threshold": self.threshold,
            "band": {"low": self.band_low, "high": self.band_high},
            "backend": self.backend,
            "fitted_on": self.fitted_on,
            "metrics": self.metrics,
        }

    @classmethod
    def load(cls, path: Path) -> RelevanceArtifact:
        """Read and validate ``path``.

        Raises:
            ConfigError: no file there (the message says how to make one), or the file is
                not a valid ``tribunal.relevance/1`` artifact.
        """
        if not path.is_file():
            raise ConfigError(
                f"no relevance artifact at {path}: create it (a {RELEVANCE_FORMAT} JSON file, "
                "see docs/ensemble.md) or set ensemble.relevance_artifact",
                field=_FIELD,
            )
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise _fail(str(path), f"not readable JSON: {exc}") from None
        return cls.from_dict(data, source=str(path))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    def check_profile(self, settings: Settings) -> None:
        """Every feature's model exists in the profile and is of the kind it needs."""
        for index, feature in enumerate(self.features):
            spec = settings.models.get(feature.model_key)
            wanted = _KINDS[feature.kind]
            if spec is None:
                raise _fail(
                    f"{self.version}",
                    f"features[{index}].model_key {feature.model_key!r} is not a model of "
                    f"profile {settings.profile!r} (known: {', '.join(settings.models)})",
                )
            if spec.kind != wanted:
                raise _fail(
                    f"{self.version}",
                    f"features[{index}] ({feature.kind}) needs an {wanted} model; "
                    f"{feature.model_key!r} is a {spec.kind}",
                )

    def inputs(self, values: Sequence[float]) -> list[float]:
        """The regression's x from raw feature values (logit for P(yes), cosine as is)."""
        out = []
        for feature, value in zip(self.features, values, strict=True):
            if feature.kind == "llm_p_yes":
                p = min(max(value, _P_CLIP), 1.0 - _P_CLIP)
                out.append(math.log(p / (1.0 - p)))
            else:
                out.append(value)
        return out

    def p_relevant(self, values: Sequence[float]) -> float:
        """sigmoid(intercept + coef . x) for raw feature values in the artifact's order."""
        z = self.intercept + sum(c * x for c, x in zip(self.coef, self.inputs(values), strict=True))
        # Stable both ways: exp of a large positive z would overflow.
        if z >= 0:
            return 1.0 / (1.0 + math.exp(-z))
        e = math.exp(z)
        return e / (1.0 + e)


def relevance_artifact_path(settings: Settings) -> Path:
    """Configured, else ``data_dir/ensemble/relevance.json`` if it exists, else the one
    shipped for the profile; when none exists, the data_dir path (to name in errors)."""
    configured = settings.ensemble.relevance_artifact
    if configured is not None:
        return configured.expanduser()
    trained = settings.data_dir / "ensemble" / "relevance.json"
    if trained.is_file():
        return trained
    return shipped_artifact(settings.profile, "relevance/artifact.json") or trained


def _decision_points(data: Mapping[str, Any], source: str) -> tuple[float, float, float]:
    """(threshold, band.low, band.high), each checked."""
    threshold = _number(data.get("threshold"), "threshold", source)
    band = data.get("band")
    if not isinstance(band, Mapping) or set(band) != {"low", "high"}:
        raise _fail(source, 'band must be {"low": ..., "high": ...}')
    low = _number(band["low"], "band.low", source)
    high = _number(band["high"], "band.high", source)
    if not 0.0 <= threshold <= 1.0:
        raise _fail(source, f"threshold is {threshold}; need 0 <= threshold <= 1")
    if not 0.0 <= low <= high <= 1.0:
        raise _fail(
            source,
            f"need 0 <= band.low <= band.high <= 1, got {low} / {high} (an empty band, "
            f"low == high, sends nothing to the debate)",
        )
    return threshold, low, high


def _check_metrics_band(metrics: Mapping[str, Any], low: float, high: float, source: str) -> None:
    """A band the figures name is the band applied, on the p_relevant scale."""
    cascade = metrics.get("cascade")
    if not isinstance(cascade, Mapping) or "band" not in cascade:
        return
    band = cascade["band"]
    if not isinstance(band, Mapping) or set(band) != {"low", "high"}:
        raise _fail(source, 'metrics.cascade.band must be {"low": ..., "high": ...}')
    named = (
        _number(band["low"], "metrics.cascade.band.low", source),
        _number(band["high"], "metrics.cascade.band.high", source),
    )
    same = math.isclose(named[0], low, abs_tol=1e-9) and math.isclose(named[1], high, abs_tol=1e-9)
    if not same:
        raise _fail(
            source,
            f"metrics.cascade.band is {named[0]}-{named[1]} but band is {low}-{high}: the "
            "figures must describe the band applied, on the p_relevant scale (re-export the "
            "artifact, or correct metrics.cascade.band)",
        )
