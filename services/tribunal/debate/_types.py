"""Values of a debate: the item, each agent's turn, rounds, the result."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

from tribunal.core.llm import Usage

__all__ = [
    "AGENT_STANCES",
    "Adjudication",
    "AgentTurn",
    "DebateItem",
    "DebateLabel",
    "DebateOutcome",
    "DebateResult",
    "DebateRound",
]


class DebateLabel(enum.Enum):
    """The label of the task: the chunk fully supports at least one answer to the query."""

    RELEVANT = "relevant"
    IRRELEVANT = "irrelevant"


AGENT_STANCES = {"A": DebateLabel.RELEVANT, "B": DebateLabel.IRRELEVANT}
"""DREAM's opposing initial stances: agent A starts "relevant", agent B "irrelevant"."""


class DebateOutcome(enum.Enum):
    """How a debate ended."""

    AGREED = "agreed"
    """Both agents gave the same label in some round: that label is final."""
    ESCALATED = "escalated"
    """No agreement after the last round: humans decide, with the history."""
    ADJUDICATED = "adjudicated"
    """No agreement after the last round: the LLM adjudicator decided."""
    FAILED = "failed"
    """An agent's (or the adjudicator's) output stayed malformed after retries: no label."""


@dataclass(frozen=True)
class DebateItem:
    """One (query, chunk, answers) triple to label, with its per-item options."""

    query: str
    chunk: str
    answers: tuple[str, ...] = ()
    """Reference answers; empty means the query is its own answer set (unless required)."""
    item_id: str = ""
    """Caller's id, echoed back."""
    max_rounds: int = 0
    """Rounds before escalation, 1..5; 0: the configured default."""
    swap_stance_order: bool | None = None
    """B (initial stance irrelevant) speaks first and the agents' models swap; None: default."""
    adjudicate: bool | None = None
    """LLM adjudicator instead of escalation; None: the configured default."""


@dataclass(frozen=True)
class AgentTurn:
    """One agent's answer in one round (or why it has none)."""

    agent: str
    """``A`` (initial stance relevant) or ``B`` (irrelevant)."""
    model: str
    """Model that produced the turn."""
    label: DebateLabel | None
    """None when the output stayed malformed (``error`` says why)."""
    evidence: str = ""
    """The quote the agent cites from the chunk."""
    rationale: str = ""
    evidence_found: bool = False
    """The quote check (entailment stage 0) found ``evidence`` in the chunk."""
    evidence_ratio: float = 0.0
    """0..100 similarity of the quote's best alignment in the chunk."""
    usage: Usage = field(default_factory=Usage)
    """Tokens and the model seconds charged to this turn (all attempts)."""
    attempts: int = 1
    error: str = ""


@dataclass(frozen=True)
class DebateRound:
    """Both agents' turns of one round, in speaking order."""

    number: int
    turns: tuple[AgentTurn, ...]

    @property
    def failed(self) -> bool:
        return any(t.label is None for t in self.turns)

    @property
    def agreed(self) -> bool:
        """Both agents gave the same label."""
        labels = {t.label for t in self.turns}
        return not self.failed and len(labels) == 1

    def turn(self, agent: str) -> AgentTurn:
        return next(t for t in self.turns if t.agent == agent)


@dataclass(frozen=True)
class Adjudication:
    """The LLM adjudicator's decision on a debate without agreement."""

    label: DebateLabel | None
    rationale: str
    model: str
    usage: Usage = field(default_factory=Usage)
    error: str = ""


@dataclass(frozen=True)
class DebateResult:
    """A finished debate."""

    item_id: str
    label: DebateLabel | None
    """The final label; None when escalated or failed."""
    outcome: DebateOutcome
    rounds: tuple[DebateRound, ...]
    adjudication: Adjudication | None = None
    max_rounds: int = 0
    """The R the debate ran under."""
    usage: Usage = field(default_factory=Usage)
    """All turns (and the adjudication) together; ``seconds`` is model time charged."""
    seconds: float = 0.0
    """Wall time from the start of the call to this item's end (latency, not cost)."""
    error: str = ""
    models: dict[str, str] = field(default_factory=dict)
    """Model of each role: ``agent_a``, ``agent_b``, ``adjudicator``."""
    prompts: dict[str, str] = field(default_factory=dict)
    """Prompt template ids by role."""

    def truncated(self, max_rounds: int) -> DebateResult:
        """The result the same debate gives with ``max_rounds`` rounds, before adjudication.

        Round k of a debate depends only on rounds before it (greedy decoding), so the
        first R rounds of a longer debate are the R-round debate: one R = 3 run yields
        R = 1, 2 and 3.
        """
        rounds = self.rounds[:max_rounds]
        return replace(
            self,
            rounds=rounds,
            adjudication=None,
            max_rounds=max_rounds,
            usage=sum((t.usage for r in rounds for t in r.turns), Usage()),
            **decide(rounds, max_rounds),  # type: ignore[arg-type]
        )


def decide(rounds: tuple[DebateRound, ...], max_rounds: int) -> dict[str, object]:
    """Label, outcome and error of a debate that has played ``rounds`` (before adjudication).

    Raises:
        ValueError: the rounds neither end the debate nor reach ``max_rounds``.
    """
    for one in rounds:
        if one.failed:
            bad = next(t for t in one.turns if t.label is None)
            return {
                "label": None,
                "outcome": DebateOutcome.FAILED,
                "error": f"round {one.number}, agent {bad.agent}: {bad.error}",
            }
        if one.agreed:
            return {"label": one.turns[0].label, "outcome": DebateOutcome.AGREED, "error": ""}
    if len(rounds) < max_rounds:
        raise ValueError(f"the debate is still open after {len(rounds)} of {max_rounds} rounds")
    return {"label": None, "outcome": DebateOutcome.ESCALATED, "error": ""}
