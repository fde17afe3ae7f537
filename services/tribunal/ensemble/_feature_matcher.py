"""The feature matcher: P(match) from embedding cosines and a fuzzy ratio, no LLM.

``ensemble.matcher: features`` serves ``Match``/``BatchMatch`` with this instead of the
LLM judge panel. On the 662-item matching set it is both cheaper (one embedder batch,
the KB entries' vectors cached: ~4x less time per pair than the six-judge panel cold,
~47x warm, ``bench/matcher.py``) and at least as accurate (docs/results/matching.md,
"The feature matcher"). A result carries no
judge verdicts; ``aggregator`` is ``features`` and ``artifact_version`` the artifact's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from ..core import ConfigError
from ._feature_artifact import MatchFeaturesArtifact, features_path
from ._match_features import match_feature_values
from ._matcher import EnsembleMatcher, MatchRequestItem, MatchResult, validate_items

if TYPE_CHECKING:
    from ..core import EnsembleSettings, Settings
    from ..retrieval import Embedder

__all__ = ["FeatureMatcher", "Matcher", "load_matcher"]


class Matcher(Protocol):
    """What the ensemble's transports call: the judge panel or the feature matcher."""

    def validate(self, items: Sequence[MatchRequestItem]) -> None: ...

    def match(self, items: Sequence[MatchRequestItem]) -> list[MatchResult]: ...

    def close(self) -> None: ...


class FeatureMatcher:
    """Matches (query, KB entry) pairs with a fitted regression over cheap features.

    Args:
        artifact: The fitted regression (:class:`MatchFeaturesArtifact`).
        embedder: The embedder it was fitted with (checked by name).
        settings: Request limits (``max_items_per_request``, ``max_query_chars``).
    """

    aggregator = "features"

    def __init__(
        self, artifact: MatchFeaturesArtifact, embedder: Embedder, settings: EnsembleSettings
    ) -> None:
        if embedder.name != artifact.embedder.name:
            raise ConfigError(
                f"the feature matcher {artifact.version} was fitted with embedder "
                f"{artifact.embedder.name}; the loaded one is {embedder.name}",
                field="ensemble.features_artifact",
            )
        self.artifact = artifact
        self.embedder = embedder
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: Settings) -> FeatureMatcher:
        """Load the artifact and the profile embedder it names."""
        from ..retrieval import CachingEmbedder, load_profile_embedder

        artifact = MatchFeaturesArtifact.load(features_path(settings))
        key = artifact.embedder.model_key
        spec = settings.models.get(key)
        if spec is None or spec.kind != "embedder":
            embedders = settings.model_keys("embedder")
            raise ConfigError(
                f"the feature matcher {artifact.version} needs embedder model {key!r}; "
                f"profile {settings.profile!r} has embedders {', '.join(embedders) or 'none'}",
                field="ensemble.features_artifact",
            )
        # KB entries come back with every query: their vectors are computed once.
        embedder = CachingEmbedder(load_profile_embedder(settings, key))
        return cls(artifact, embedder, settings.ensemble)

    def validate(self, items: Sequence[MatchRequestItem]) -> None:
        """Check a request before any model runs (raises the caller-facing error)."""
        validate_items(items, self.settings)

    def match(self, items: Sequence[MatchRequestItem]) -> list[MatchResult]:
        """P(match) for each pair, in request order."""
        self.validate(items)
        values = match_feature_values(
            [item.query for item in items],
            [item.candidate.question for item in items],
            [item.candidate.answer for item in items],
            self.embedder,
        )
        p_match = self.artifact.p_match(values)
        return [
            MatchResult(
                p_match=float(p),
                match=bool(p >= self.artifact.threshold),
                judges=(),
                aggregator=self.aggregator,
                artifact_version=self.artifact.version,
                prompt_tokens=0,
                threshold=float(self.artifact.threshold),
            )
            for p in p_match
        ]

    def close(self) -> None:
        """Nothing to release: no engine threads, the embedder is freed with this object."""


def load_matcher(settings: Settings) -> Matcher:
    """The matcher ``ensemble.matcher`` selects: the LLM judge panel or the feature matcher."""
    if settings.ensemble.matcher == "features":
        return FeatureMatcher.from_settings(settings)
    return EnsembleMatcher.from_settings(settings)
