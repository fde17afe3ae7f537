"""The ensemble service: the matcher (LLM judges or features) and the relevance judge."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ._base import Section
from ._choices import AggregatorName
from ._deployment import DeploymentSettings

__all__ = ["EnsembleSettings"]


class EnsembleSettings(Section):
    """Knobs of the ensemble matching service (LLM judges + a trained aggregator)."""

    prompts: tuple[str, ...] = Field(
        ("matching/ral2m@1", "matching/ral2m-augmented@1"), min_length=1
    )
    """Judge prompt ids; every ``roles.judges`` model runs each (judge ``model/prompt``)."""
    judges: tuple[str, ...] | None = None
    """Only these judge names (``llm_tiny/ral2m``, ...); null: every model x prompt. A
    trained artifact overrides this with the judges it was trained on."""
    artifact_path: Path | None = None
    """Trained aggregator artifact (a folder); null: ``data_dir/ensemble/artifact`` when it
    exists, else the one shipped for the profile (not when ``judges`` names a panel)."""
    matcher: Literal["judges", "features"] = "judges"
    """What answers ``Match``: ``judges`` (the LLM judge panel and ``aggregator``) or
    ``features`` (no LLM: a logistic regression over embedding cosines and a fuzzy
    ratio, from ``features_artifact``)."""
    features_artifact: Path | None = None
    """``matcher: features``: its ``tribunal.match-features/1`` JSON file; null:
    ``data_dir/ensemble/match-features.json`` when it exists, else the one shipped for
    the profile (``artifacts/<profile>/ensemble/match-features.json``)."""
    tuned_matcher: Path | None = None
    """``matcher: features``: a tuned-matcher directory (``tribunal tune``) to serve instead
    of ``features_artifact``; null: the one ``data_dir/tuned/<gateway.collection>/current``
    names, when that collection was tuned."""
    aggregator: AggregatorName = "majority"
    """Aggregator the service answers with; ``majority`` also runs without an artifact (at
    ``vote_threshold``; with one, at its fitted per-judge thresholds). The trained ones
    need the artifact."""
    vote_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """P(yes) at or above which a judge votes yes when no artifact sets its threshold."""
    truncate_answer_chars: int = Field(600, ge=50, le=1_000_000)
    """KB answers are cut to this many characters before judging (bounds the prompt cost)."""
    truncate_chunk_chars: int = Field(300, ge=50, le=1_000_000)
    """The supporting chunk the augmented judges see is cut to this many characters."""
    max_query_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest query accepted, in characters."""
    max_items_per_request: int = Field(64, ge=1, le=100_000)
    """Most items (query-candidate pairs) in one ``BatchMatch``, and in one call of the
    relevance judge."""
    relevance_artifact: Path | None = None
    """Relevance judge artifact (a ``tribunal.relevance/1`` JSON file) that
    ``JudgeRelevance`` serves; null: ``data_dir/ensemble/relevance.json`` when it exists,
    else the one shipped for the profile (``artifacts/<profile>/relevance/artifact.json``)."""
    max_chunk_chars: int = Field(20_000, ge=1, le=10_000_000)
    """Longest chunk ``JudgeRelevance`` accepts, in characters (the prompt cuts the passage
    to fit the model; this bounds the work before that)."""
    max_answers_per_item: int = Field(16, ge=1, le=10_000)
    """Most reference answers in one ``JudgeRelevance``."""
    max_answer_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest reference answer ``JudgeRelevance`` accepts, in characters."""
    deployment: DeploymentSettings = DeploymentSettings(max_batch_size=8)
    """Ray Serve deployment options (single pairs are batched up to ``max_batch_size``)."""
