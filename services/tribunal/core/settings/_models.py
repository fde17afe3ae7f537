"""The profile's models and which of them plays each role."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from ..models._catalog import CATALOG
from ._base import Section

__all__ = ["ModelSpec", "RoleSettings"]


class ModelSpec(Section):
    """Where one model comes from: an offline catalog artifact or a hub id."""

    kind: Literal["embedder", "llm", "cross-encoder", "nli"]
    """What the model does; decides which loader reads it."""
    artifact: str | None = None
    """Offline artifact id from the model catalog (``tribunal.core.models.CATALOG``)."""
    hf_id: str | None = None
    """Hugging Face model id (needs the hub or a pre-filled HF cache)."""

    @model_validator(mode="after")
    def _one_source(self) -> ModelSpec:
        if (self.artifact is None) == (self.hf_id is None):
            raise ValueError("set exactly one of 'artifact' or 'hf_id'")
        if self.artifact is not None and self.artifact not in CATALOG:
            raise ValueError(
                f"unknown artifact {self.artifact!r}; known: {', '.join(sorted(CATALOG))}"
            )
        return self


class RoleSettings(Section):
    """Which model (a key of ``models``) plays each role."""

    embedder: str
    """Embeds KB entries and queries for dense retrieval."""
    reranker: str
    """Re-orders the fused retrieval hits of a ``rerank`` search."""
    entailment_fast: str
    """Stage 1 of the entailment cascade: checks every pair."""
    entailment_strong: str
    """Stage 2 of the entailment cascade: checks the pairs stage 1 is unsure of."""
    judges: list[str] = Field(min_length=1)
    """The LLM judges of the ensemble's matching panel (each runs every prompt)."""
    debate_agents: list[str] = Field(min_length=2, max_length=2)
    """The two debaters: A argues relevant, B irrelevant."""
    adjudicator: str
    """Decides a debate that ends without agreement (with ``debate.adjudicate``)."""

    def names(self) -> dict[str, str]:
        """Role name (``judges[1]`` for list roles) to model key."""
        out: dict[str, str] = {}
        for role, value in self.model_dump().items():
            if isinstance(value, list):
                out.update({f"{role}[{i}]": v for i, v in enumerate(value)})
            else:
                out[role] = value
        return out
