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
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..core import ConfigError, python_turn
from ._feature_artifact import MatchFeaturesArtifact, features_path
from ._match_features import entry_texts, match_feature_values
from ._matcher import EnsembleMatcher, MatchRequestItem, MatchResult, validate_items

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    from ..core import EnsembleSettings, Settings
    from ..embedding import CachingEmbedder, Embedder, VectorStore
    from ..kb import KbEntry
    from ._tuned_artifact import TunedMatcher

__all__ = [
    "FeatureMatcher",
    "Matcher",
    "load_matcher",
    "matcher_model_keys",
    "precompute_entry_vectors",
    "served_feature_matcher",
    "tuned_matcher_dir",
]


class Matcher(Protocol):
    """What the ensemble's transports call: the judge panel or the feature matcher."""

    concurrent_calls: bool
    """True: calls should reach ``match`` concurrently (it batches them itself); False:
    one at a time."""

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
    concurrent_calls = True

    def __init__(
        self,
        artifact: MatchFeaturesArtifact,
        embedder: Embedder,
        settings: EnsembleSettings,
        *,
        entry_embedder: Embedder | None = None,
        version: str | None = None,
    ) -> None:
        if embedder.name != artifact.embedder.name:
            raise ConfigError(
                f"the feature matcher {artifact.version} was fitted with embedder "
                f"{artifact.embedder.name}; the loaded one is {embedder.name}",
                field="ensemble.features_artifact",
            )
        self.artifact = artifact
        self.version = version or artifact.version
        """What results name as ``artifact_version``: a tuned matcher's version, else the
        regression's (a calibrator is bound to it)."""
        self.embedder = embedder
        self.entry_embedder = entry_embedder
        self.settings = settings

    @classmethod
    def from_settings(cls, settings: Settings) -> FeatureMatcher:
        """Load the artifact and the profile embedder it names; the entries' vectors are
        kept in memory and in ``data_dir/vectors`` (see :func:`precompute_entry_vectors`)."""
        tuned = tuned_matcher_dir(settings)
        if tuned is not None:
            return _tuned_matcher(settings, tuned)
        artifact, embedder = _artifact_embedder(settings)
        entries = _entry_embedder(settings, embedder)
        return cls(artifact, embedder, settings.ensemble, entry_embedder=entries)

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
            entry_embedder=self.entry_embedder,
            # Several phrasings of an entry's question: each feature takes the best one.
            phrasings=[item.candidate.phrasings() for item in items],
        )
        with python_turn():
            return self._results(values)

    def _results(self, values: dict[str, NDArray[np.float64]]) -> list[MatchResult]:
        p_match = self.artifact.p_match(values)
        return [
            MatchResult(
                p_match=float(p),
                match=bool(p >= self.artifact.threshold),
                judges=(),
                aggregator=self.aggregator,
                artifact_version=self.version,
                prompt_tokens=0,
                threshold=float(self.artifact.threshold),
            )
            for p in p_match
        ]

    def close(self) -> None:
        """Nothing to release: no engine threads, the embedder is freed with this object."""


def tuned_matcher_dir(settings: Settings, collection: str | None = None) -> Path | None:
    """The tuned matcher to serve: ``ensemble.tuned_matcher``, else the current tune of
    ``collection`` (default ``gateway.collection``) under ``data_dir``; None when there
    is none."""
    from ._tuned_artifact import current_tuned_dir

    if settings.ensemble.tuned_matcher is not None:
        return settings.ensemble.tuned_matcher.expanduser()
    return current_tuned_dir(settings.data_dir, collection or settings.gateway.collection)


def served_feature_matcher(settings: Settings) -> str | None:
    """``features:<version>`` as the feature matcher will report it (a tuned matcher's
    version, else the regression's), without loading a model; None when the judges match."""
    from ._tuned_artifact import TunedMatcher

    if settings.ensemble.matcher != "features":
        return None
    tuned = tuned_matcher_dir(settings)
    if tuned is not None:
        return f"{FeatureMatcher.aggregator}:{TunedMatcher.load(tuned).version}"
    return (
        f"{FeatureMatcher.aggregator}:{MatchFeaturesArtifact.load(features_path(settings)).version}"
    )


def _tuned_matcher(settings: Settings, directory: Path) -> FeatureMatcher:
    """The feature matcher of a ``tribunal tune`` directory: its model, its head, its
    version (checked against the directory's contents)."""
    tuned, artifact, embedder = _tuned_model(settings, directory)
    return FeatureMatcher(
        artifact,
        embedder,
        settings.ensemble,
        entry_embedder=_entry_embedder(settings, embedder, vectors_name=tuned.vectors_name),
        version=tuned.version,
    )


def _tuned_model(
    settings: Settings, directory: Path
) -> tuple[TunedMatcher, MatchFeaturesArtifact, Embedder]:
    """A verified tune, its head, and this process's embedder of its model."""
    from ._tuned_artifact import TunedMatcher
    from ._tuned_serving import tuned_embedder

    tuned = TunedMatcher.load(directory)
    artifact = MatchFeaturesArtifact.load(tuned.head_path)
    return tuned, artifact, tuned_embedder(settings, tuned, artifact.embedder.name)


def _artifact_embedder(settings: Settings) -> tuple[MatchFeaturesArtifact, Embedder]:
    """The feature matcher's artifact and this process's embedder of the model it names."""
    from ..embedding import shared_profile_embedder

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
    return artifact, shared_profile_embedder(settings, key, query_model=True)


def _entry_store(
    settings: Settings, embedder: Embedder, *, vectors_name: str | None = None
) -> VectorStore:
    """Where the feature matcher's vectors of KB entries are kept (``data_dir/vectors``),
    under ``vectors_name`` (default: the embedder's name; a tune's
    :attr:`~tribunal.ensemble.TunedMatcher.vectors_name`)."""
    from ..embedding import VectorStore

    return VectorStore.for_model(
        settings.data_dir, model=vectors_name or embedder.name, dimension=embedder.dimension
    )


def _entry_embedder(
    settings: Settings, embedder: Embedder, *, vectors_name: str | None = None
) -> CachingEmbedder:
    """KB entries come back with every query that finds them: their vectors are computed
    once, kept in memory and on disk (across restarts, shared with ingestion)."""
    from ..embedding import CachingEmbedder

    return CachingEmbedder(
        embedder, store=_entry_store(settings, embedder, vectors_name=vectors_name)
    )


def precompute_entry_vectors(
    settings: Settings,
    entries: Sequence[KbEntry],
    *,
    collection: str | None = None,
    progress: bool = False,
) -> int:
    """Embed, with the feature matcher's model, the texts of ``entries`` it needs at match
    time (each phrasing of the question, the answer, each phrasing + answer) into
    ``data_dir/vectors``, so that no query waits for an entry's first forward pass.
    ``collection`` (default ``gateway.collection``) with a tune gets its tuned model's
    vectors, in the tune's store.
    Returns how many texts were new (0 when every one was stored already, or when
    ``ensemble.matcher`` is not ``features``)."""
    from tqdm import tqdm

    if settings.ensemble.matcher != "features" or not entries:
        return 0
    tuned_dir = tuned_matcher_dir(settings, collection)
    if tuned_dir is None:
        _, embedder = _artifact_embedder(settings)
        store = _entry_store(settings, embedder)
    else:  # the collection's tune serves it: its model, its store
        tuned, _, embedder = _tuned_model(settings, tuned_dir)
        store = _entry_store(settings, embedder, vectors_name=tuned.vectors_name)
    try:
        texts = list(
            dict.fromkeys(
                text
                for e in entries
                for phrasing in (e.phrasings() or (e.question,))
                for text in entry_texts(phrasing, e.answer)
            )
        )
        known = store.get(texts)
        new = [t for t in texts if t not in known]
        # Stored a block at a time: an interrupted run keeps what it embedded.
        with tqdm(
            total=len(new), desc="match vectors", unit="text", disable=not (progress and new)
        ) as bar:
            # Blocks of 32: the bar's rate and ETA move every few seconds even on a busy CPU.
            for start in range(0, len(new), 32):
                block = new[start : start + 32]
                store.put(block, embedder.embed(block))
                bar.update(len(block))
        return len(new)
    finally:
        store.close()


def matcher_model_keys(settings: Settings) -> tuple[str, ...]:
    """The profile's models :func:`load_matcher` loads: the feature matcher's embedder
    (named by its artifact), or every judge's LLM and the embedder role."""
    if settings.ensemble.matcher == "features":
        return (MatchFeaturesArtifact.load(features_path(settings)).embedder.model_key,)
    from ._judges import judge_specs

    keys = dict.fromkeys(spec.model_key for spec in judge_specs(settings))
    if settings.roles is not None:
        keys[settings.roles.embedder] = None
    return tuple(keys)


def load_matcher(settings: Settings) -> Matcher:
    """The matcher ``ensemble.matcher`` selects: the LLM judge panel or the feature matcher."""
    if settings.ensemble.matcher == "features":
        return FeatureMatcher.from_settings(settings)
    return EnsembleMatcher.from_settings(settings)
