"""The ensemble service's domain object: judges + query embedder + a trained aggregator.

A match runs: validate → every judge on every pair (one engine call per model, the
models in parallel) → embed the queries (one batch) → votes at the artifact's per-judge
thresholds → the aggregator's P(match). Transports (gRPC, Ray Serve) call this and
only translate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..core import (
    ConfigError,
    FailedPreconditionError,
    InvalidArgumentError,
    ResourceExhaustedError,
    resolve_artifact,
)
from ..kb import KbEntry
from ._artifact import EnsembleArtifact
from ._base import Aggregator, EnsembleInputs
from ._judges import JudgePanel
from ._majority import MajorityVote

if TYPE_CHECKING:
    from ..core import EnsembleSettings, Settings
    from ..embedding import Embedder

__all__ = [
    "EnsembleMatcher",
    "JudgeVerdict",
    "MatchRequestItem",
    "MatchResult",
    "validate_items",
]


@dataclass(frozen=True)
class MatchRequestItem:
    """One (query, candidate) pair to match."""

    query: str
    candidate: KbEntry


@dataclass(frozen=True)
class JudgeVerdict:
    judge: str
    """``model_key/prompt_name``."""
    model: str
    """Model id (artifact id or hub id)."""
    prompt: str
    """Template id the verdict came from."""
    vote: bool
    p_yes: float


@dataclass(frozen=True)
class MatchResult:
    p_match: float
    match: bool
    judges: tuple[JudgeVerdict, ...]
    aggregator: str
    artifact_version: str
    """"" when the aggregator needs no artifact (majority without one)."""
    prompt_tokens: int
    threshold: float | None = None
    """The aggregator's decision point: ``match`` is ``p_match >= threshold``."""


class EnsembleMatcher:
    """Matches (query, KB entry) pairs with a judge panel and one aggregator.

    Args:
        panel: The judges; their order must be the artifact's.
        embedder: Query embedder (the artifact's).
        settings: Limits and defaults.
        artifact: Trained aggregators; None allows only ``majority``.
        aggregator: Which aggregator answers (default: ``settings.aggregator``).
    """

    concurrent_calls = False
    """The judges' engines batch within a call and keep prompt-prefix caches: one call at
    a time."""

    def __init__(
        self,
        panel: JudgePanel,
        embedder: Embedder | None,
        settings: EnsembleSettings,
        artifact: EnsembleArtifact | None = None,
        aggregator: str | None = None,
    ) -> None:
        self.panel = panel
        self.embedder = embedder
        self.settings = settings
        self.artifact = artifact
        self.aggregator_name = aggregator or settings.aggregator
        self.aggregator: Aggregator
        if artifact is None:
            if self.aggregator_name != "majority":
                raise ConfigError(
                    f"the {self.aggregator_name!r} aggregator needs a trained artifact "
                    "(`tribunal ensemble train`); without one set ensemble.aggregator=majority",
                    field="ensemble.artifact_path",
                )
            self.aggregator = MajorityVote().set_judges(len(panel.judges))
            self.thresholds = np.full(len(panel.judges), settings.vote_threshold)
            self.version = ""
        else:
            if list(artifact.judges) != panel.names:
                raise ConfigError(
                    f"the artifact was trained on judges {list(artifact.judges)}, the panel "
                    f"has {panel.names}",
                    field="ensemble.judges",
                )
            if embedder is not None and embedder.name != artifact.embedder:
                raise ConfigError(
                    f"the artifact's query embedder is {artifact.embedder}, the profile's is "
                    f"{embedder.name}",
                    field="roles.embedder",
                )
            self.aggregator = artifact.aggregator(self.aggregator_name)
            self.thresholds = artifact.vote_thresholds
            self.version = artifact.version

    @classmethod
    def from_settings(cls, settings: Settings, *, backend: Any = None) -> EnsembleMatcher:
        """Load the artifact (if any), its judges and the profile's embedder."""
        from ..embedding import shared_profile_embedder

        options = settings.ensemble
        # Configured, else trained here (data_dir), else the one shipped for the profile —
        # unless the settings name their own judge panel, which the shipped one is not.
        path = (
            settings.data_dir / "ensemble" / "artifact"
            if options.artifact_path is None and options.judges is not None
            else resolve_artifact(settings, options.artifact_path, "ensemble/artifact")
        )
        artifact = None
        if (path / "manifest.json").is_file():
            artifact = EnsembleArtifact.load(path)
        elif options.aggregator != "majority" or options.artifact_path is not None:
            artifact = EnsembleArtifact.load(path)  # raises NotFoundError naming the path
        names = list(artifact.judges) if artifact is not None else None
        panel = JudgePanel.from_settings(settings, names, backend=backend)
        embedder = shared_profile_embedder(settings) if artifact is not None else None
        return cls(panel, embedder, options, artifact)

    def validate(self, items: Sequence[MatchRequestItem]) -> None:
        """Check a request before any model runs (raises the caller-facing error)."""
        validate_items(items, self.settings)

    def match(self, items: Sequence[MatchRequestItem]) -> list[MatchResult]:
        """P(match) and every judge's verdict for each pair, in request order."""
        self.validate(items)
        output = self.panel.judge([(item.query, item.candidate) for item in items])
        p_yes = np.asarray(output.p_yes, dtype=np.float32)
        if self.embedder is not None:
            embeddings = self.embedder.embed([item.query for item in items])
        else:
            embeddings = np.zeros((len(items), 1), dtype=np.float32)
        inputs = EnsembleInputs.from_p_yes(p_yes, embeddings, self.thresholds)
        if self.artifact is not None and inputs.dimension != self.artifact.dimension:
            raise FailedPreconditionError(
                f"query vectors have {inputs.dimension} dimensions, the artifact "
                f"{self.artifact.dimension}",
                field="roles.embedder",
            )
        p_match = self.aggregator.predict_proba(inputs)
        decisions = self.aggregator.predict(inputs)
        results = []
        for row in range(len(items)):
            verdicts = tuple(
                JudgeVerdict(
                    judge=judge.name,
                    model=judge.engine.model_name,
                    prompt=output.prompts[row][column],
                    vote=bool(inputs.votes[row, column]),
                    p_yes=float(output.p_yes[row][column]),
                )
                for column, judge in enumerate(self.panel.judges)
            )
            results.append(
                MatchResult(
                    p_match=float(p_match[row]),
                    match=bool(decisions[row]),
                    judges=verdicts,
                    aggregator=self.aggregator.name,
                    artifact_version=self.version,
                    prompt_tokens=output.per_pair_tokens[row],
                    threshold=float(self.aggregator.threshold_),
                )
            )
        return results

    def close(self) -> None:
        self.panel.close()


def validate_items(items: Sequence[MatchRequestItem], settings: EnsembleSettings) -> None:
    """Check a match request before any model runs (raises the caller-facing error)."""
    if not items:
        raise InvalidArgumentError("items must not be empty", field="items")
    if len(items) > settings.max_items_per_request:
        raise ResourceExhaustedError(
            f"at most {settings.max_items_per_request} items per call "
            f"(ensemble.max_items_per_request), got {len(items)}: split the batch",
            field="items",
        )
    for index, item in enumerate(items):
        where = f"items[{index}]" if len(items) > 1 else ""
        if not item.query.strip():
            raise InvalidArgumentError(
                "query must be non-empty", field=f"{where}.query".lstrip(".")
            )
        if len(item.query) > settings.max_query_chars:
            raise InvalidArgumentError(
                f"query is longer than {settings.max_query_chars} characters "
                "(ensemble.max_query_chars)",
                field=f"{where}.query".lstrip("."),
            )
        if not item.candidate.question.strip() or not item.candidate.answer.strip():
            raise InvalidArgumentError(
                "candidate needs a non-empty question and answer",
                field=f"{where}.candidate".lstrip("."),
            )
