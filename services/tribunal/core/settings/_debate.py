"""The DREAM debate service: two agents, R rounds, escalation."""

from __future__ import annotations

from pydantic import Field

from ._base import Section
from ._deployment import DeploymentSettings

__all__ = ["DebateSettings"]


class DebateSettings(Section):
    """Knobs of the DREAM debate service (two agents, R rounds, escalation)."""

    max_rounds: int = Field(2, ge=1, le=5)
    """Rounds without agreement before a debate escalates (DREAM's R; requests may ask 1..5)."""
    adjudicate: bool = False
    """After R rounds without agreement, let the LLM adjudicator (role ``adjudicator``)
    decide instead of escalating to humans; a request may override it."""
    swap_stance_order: bool = False
    """Default speaking order: B (irrelevant) first and the models of A and B swapped."""
    require_answers: bool = False
    """Refuse items without reference answers; otherwise the query is its own answer set."""
    max_new_tokens: int = Field(160, ge=8, le=4096)
    """Bound on one turn's JSON (~50 tokens when the agent keeps to the asked lengths); at
    96 the 0.5B model's verbose turns were cut off, and a cut turn costs a retry."""
    json_retries: int = Field(2, ge=0, le=10)
    """Retries of a malformed turn before it is recorded as a failure (never as a label)."""
    max_items_per_request: int = Field(64, ge=1, le=100_000)
    """Most items in one ``BatchAssess``."""
    max_query_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest query accepted, in characters."""
    max_chunk_chars: int = Field(8_000, ge=1, le=10_000_000)
    """Longest chunk accepted, in characters (the prompt template cuts what does not fit
    the model)."""
    max_answers_per_item: int = Field(16, ge=1, le=10_000)
    """Most reference answers per item."""
    max_answer_chars: int = Field(2_000, ge=1, le=1_000_000)
    """Longest reference answer accepted, in characters."""
    deployment: DeploymentSettings = DeploymentSettings(max_batch_size=8)
    """Ray Serve deployment options (single items are batched up to ``max_batch_size``)."""
