"""Debate: DREAM multi-agent relevance assessment with escalation (papers/dream…).

Two agents with opposing initial stances (A: relevant, B: irrelevant) debate whether a
chunk fully supports at least one answer to a query. Agreement in any round labels the
item (AGREED); after R rounds without agreement it escalates to humans with the full
history (ESCALATED), or an LLM adjudicator decides (ADJUDICATED). A turn that stays
malformed after retries fails the item (FAILED), never becomes a label.

:class:`DreamDebate` advances many items round by round, each round one batched
engine call. Framework-free: the gRPC adapter is :mod:`.servicer`, the Ray Serve
application :mod:`.app`.

    debate = build_debate(load_settings("tiny"))
    result = debate.assess(DebateItem(query="...", chunk="...", answers=("...",)))
"""

from ._factory import build_debate
from ._types import (
    AGENT_STANCES,
    Adjudication,
    AgentTurn,
    DebateItem,
    DebateLabel,
    DebateOutcome,
    DebateResult,
    DebateRound,
)

__all__ = [
    "AGENT_STANCES",
    "Adjudication",
    "AgentTurn",
    "DebateItem",
    "DebateLabel",
    "DebateOutcome",
    "DebateResult",
    "DebateRound",
    "build_debate",
]
