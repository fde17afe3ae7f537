"""The entailment cascade: quote check, fast checker, strong checker."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ._base import Section
from ._deployment import DeploymentSettings

__all__ = ["EntailmentSettings"]


class EntailmentSettings(Section):
    """Knobs of the entailment cascade (quote check, fast and strong checkers)."""

    two_stage: bool = True
    """Run the strong checker (role ``entailment_strong``) on uncertain pairs."""
    fast_backend: Literal["model", "lexical"] = "model"
    """Stage 1: the ``entailment_fast`` model, or the model-free lexical-overlap prefilter."""
    uncertain_low: float = Field(0.2, ge=0.0, le=1.0)
    """Stage-1 P(entail) at or above which a pair is uncertain (goes to stage 2); below
    it the fast checker says "not entailed"."""
    uncertain_high: float = Field(0.8, ge=0.0, le=1.0)
    """Stage-1 P(entail) at or below which a pair is still uncertain; above it the fast
    checker says "entailed". Choose the band on data: a small model's P(yes) is
    compressed, so a symmetric band around 0.5 routes nearly every pair to stage 2."""
    entail_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """P(entail) at or above which a pair is labelled entailed."""
    contradict_threshold: float = Field(0.5, ge=0.0, le=1.0)
    """P(contradict) at or above which a non-entailed pair is labelled contradicted."""
    chunk_size_chars: int = Field(2000, ge=50, le=100_000)
    """Premises are split into sentence-aligned chunks of at most this many characters
    (~450 tokens, MiniCheck's chunk size); the pair's support is the max over chunks."""
    quote_min_ratio: float = Field(90.0, gt=0.0, le=100.0)
    """rapidfuzz partial ratio at or above which a quote counts as found."""
    quote_min_chars: int = Field(12, ge=1, le=10_000)
    """Shorter quotes (after normalisation) must match exactly."""
    max_pairs_per_request: int = Field(256, ge=1, le=100_000)
    """Most pairs in one ``Check``."""
    max_premise_chars: int = Field(20_000, ge=1, le=10_000_000)
    """Longest premise accepted, in characters."""
    max_hypothesis_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest hypothesis accepted, in characters."""
    max_quote_chars: int = Field(1_000, ge=1, le=100_000)
    """Longest quote accepted, in characters: fuzzy alignment costs grow with the square
    of the quote's length, so this bounds the work of one quote."""
    max_quotes_per_request: int = Field(64, ge=1, le=100_000)
    """Most quotes in one ``CheckQuotes``."""
    deployment: DeploymentSettings = DeploymentSettings(max_batch_size=8)
    """Ray Serve deployment options (single pairs are batched up to ``max_batch_size``)."""

    @model_validator(mode="after")
    def _band_is_ordered(self) -> EntailmentSettings:
        if self.uncertain_low > self.uncertain_high:
            raise ValueError("uncertain_low must be <= uncertain_high")
        return self
