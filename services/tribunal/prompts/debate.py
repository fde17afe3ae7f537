"""DREAM debate: the two agents' turns and the LLM adjudicator (papers/dream…).

Both templates ask for a small JSON object stated in plain words (a full JSON schema
costs ~80 prompt tokens per turn and small models follow the plain form better); the
debate service validates the answer against its pydantic model and retries through
the LLM engine's schema-constrained generation when it is invalid.

Layout for prefix reuse: the shared rules first, then the item (query, answers,
passage), then what differs per agent and round (who the agent is, its stance or the
previous round's arguments). The two agents of one item therefore share everything
up to the agent block.
"""

from __future__ import annotations

from ._template import PromptTemplate, register

__all__ = ["DEBATE_ADJUDICATOR", "DEBATE_AGENT", "DEBATE_READOUT"]

_RULES = (
    "Two agents, Agent A and Agent B, debate one question: does the passage fully support "
    "at least one of the answers to the query? Label 'relevant' if the passage itself "
    "states such an answer; label 'irrelevant' if it is off-topic, only shares words with "
    "the query, or is on the topic without giving an answer. Do not judge whether an "
    "answer is true, only whether the passage supports it. Be brief."
)

DEBATE_AGENT = register(
    PromptTemplate(
        role="debate",
        name="agent",
        version=1,
        system="You are a careful debater who rates search results.",
        instructions=_RULES,
        item="Query: {query}\nAnswers: {answers}\nPassage: {chunk}\n\n{turn}",
        question=(
            'Reply with only this JSON: {"label": "relevant" or "irrelevant", '
            '"evidence": "<at most 15 words copied exactly from the passage>", '
            '"rationale": "<at most 15 words>"}'
        ),
        truncatable="chunk",
        description="one DREAM agent turn: stance in round 1, critique of the last round after",
    ),
    default=True,
)

DEBATE_ADJUDICATOR = register(
    PromptTemplate(
        role="debate",
        name="adjudicator",
        version=1,
        system="You are an impartial judge of search relevance.",
        instructions=_RULES
        + " They did not agree. Read their final arguments and decide the label yourself.",
        item="Query: {query}\nAnswers: {answers}\nPassage: {chunk}\n\n{history}",
        question=(
            'Reply with only this JSON: {"label": "relevant" or "irrelevant", '
            '"rationale": "<at most 15 words>"}'
        ),
        truncatable="chunk",
        description="LLM adjudicator of a DREAM debate that ended without agreement",
    ),
)

DEBATE_READOUT = register(
    PromptTemplate(
        role="debate",
        name="readout",
        version=1,
        system="You are an impartial judge of search relevance.",
        instructions=_RULES
        + " Read both agents' opening arguments, then answer the question yourself.",
        item="Query: {query}\nAnswers: {answers}\nPassage: {chunk}\n\n{history}",
        question="Does the passage answer the query? Answer Yes or No.",
        truncatable="chunk",
        description="the label read as P(yes) from the logits after the agents argued "
        "(a DREAM variant; lab/experiments/debate_logits.py)",
    ),
)
