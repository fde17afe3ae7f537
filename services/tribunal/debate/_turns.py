"""Agent and adjudicator turns: prompts, the JSON answer schemas, generation with retries.

A round's prompts go to the engine in one batched ``generate`` call. Each answer is
validated against its pydantic schema; an invalid one is retried alone through
:meth:`LLMEngine.generate_json` (told what was wrong, decoded under the schema's
grammar where the backend can), and a turn still invalid after the retries is
recorded as a failure. ``generate_json`` over the whole batch would raise for the
batch when one answer stays invalid, losing every other item's turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tribunal.core.llm import (
    LLMEngine,
    MalformedOutputError,
    Message,
    Prompt,
    Usage,
    extract_json,
)
from tribunal.prompts import PromptTemplate

from ._types import AGENT_STANCES, AgentTurn, DebateItem, DebateRound

__all__ = [
    "AdjudicatorAnswer",
    "AgentAnswer",
    "JsonTurn",
    "adjudicator_prompt",
    "agent_prompt",
    "generate_turns",
]

M = TypeVar("M", bound=BaseModel)


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")

    label: Literal["relevant", "irrelevant"]
    rationale: str = Field(max_length=1_000)

    @field_validator("label", mode="before")
    @classmethod
    def _plain_label(cls, value: Any) -> Any:
        # "Relevant" and " relevant" are the label; anything else is not.
        return value.strip().lower() if isinstance(value, str) else value


class AgentAnswer(_Answer):
    """One agent's turn as JSON."""

    evidence: str = Field(max_length=1_000)
    """A short exact quote from the chunk."""


class AdjudicatorAnswer(_Answer):
    """The adjudicator's decision as JSON."""


@dataclass(frozen=True)
class JsonTurn:
    """A validated answer, or the reason there is none."""

    value: BaseModel | None
    usage: Usage
    attempts: int
    error: str = ""


def _answers_text(item: DebateItem) -> str:
    answers = item.answers or (item.query,)
    return " | ".join(a.strip() for a in answers)


def _other(agent: str) -> str:
    return "B" if agent == "A" else "A"


def _argument(turn: AgentTurn, *, own: bool) -> str:
    who = f"Agent {turn.agent} (you)" if own else f"Agent {turn.agent}"
    label = turn.label.value if turn.label is not None else "no answer"
    found = "" if turn.evidence_found else " [this quote is NOT in the passage]"
    return f'{who}: label {label}; evidence "{turn.evidence}"{found}; rationale: {turn.rationale}'


def agent_prompt(
    template: PromptTemplate,
    engine: LLMEngine[Any],
    item: DebateItem,
    agent: str,
    previous: DebateRound | None,
) -> Prompt:
    """The prompt of ``agent``'s turn: its stance in round 1, the last round's arguments after.

    Round 1 makes the agent argue its assigned stance (DREAM's opposing initialisation:
    it concedes only when the passage leaves nothing to argue with); later rounds show
    both agents' previous arguments, the agent's own marked "(you)".
    """
    stance = AGENT_STANCES[agent]
    opponent = _other(agent)
    intro = f"You are Agent {agent}; your opponent is Agent {opponent}."
    if previous is None:
        turn = (
            f"{intro} Round 1. Your initial stance: the passage is {stance.value}. Make the "
            f"strongest honest case that it is {stance.value}: quote the passage words that "
            f"best back your stance. Keep the label {stance.value} unless the passage leaves "
            "no argument for it at all."
        )
    else:
        lines = [_argument(t, own=t.agent == agent) for t in previous.turns]
        turn = (
            f"{intro} Round {previous.number + 1}. Arguments of round {previous.number}:\n"
            + "\n".join(lines)
            + f"\nCritique Agent {opponent}'s argument and give your label for this round. "
            f"Change your label only if Agent {opponent}'s evidence from the passage "
            "convinces you."
        )
    return template.render(
        engine, query=item.query, answers=_answers_text(item), chunk=item.chunk, turn=turn
    )


def adjudicator_prompt(
    template: PromptTemplate, engine: LLMEngine[Any], item: DebateItem, last: DebateRound
) -> Prompt:
    """The adjudicator's prompt: the item and both agents' arguments of the final round."""
    history = f"Final arguments (round {last.number}):\n" + "\n".join(
        _argument(t, own=False) for t in last.turns
    )
    return template.render(
        engine, query=item.query, answers=_answers_text(item), chunk=item.chunk, history=history
    )


def _validate(schema: type[M], text: str) -> M:
    """The answer parsed from ``text``; ValueError saying what is wrong."""
    value = extract_json(text)
    try:
        return schema.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise ValueError(problems) from exc


def generate_turns(
    engine: LLMEngine[Any],
    prompts: Sequence[Prompt],
    schema: type[BaseModel],
    *,
    max_new_tokens: int,
    retries: int,
) -> list[JsonTurn]:
    """One validated answer (or a recorded failure) per prompt; the prompts run as one batch."""
    if not prompts:
        return []
    generations = engine.generate(prompts, max_new_tokens=max_new_tokens)
    out: list[JsonTurn] = []
    for prompt, generation in zip(prompts, generations, strict=True):
        try:
            out.append(JsonTurn(_validate(schema, generation.text), generation.usage, 1))
            continue
        except ValueError as exc:
            problem = str(exc)
        if generation.finish_reason == "length":
            # Small models run long; "no JSON object" alone leads them to argue about JSON.
            problem = (
                f"it was cut off after {max_new_tokens} tokens before the JSON ended; "
                "give the same JSON with a much shorter rationale and evidence"
            )
        if retries == 0:
            out.append(
                JsonTurn(
                    None,
                    generation.usage,
                    1,
                    f"malformed answer ({problem}): {generation.text[:200]!r}",
                )
            )
            continue
        # The engine's own retry loop, started from this failed first attempt. Measured on
        # 300 TREC DL debates: told only "no JSON object", the 0.5B agent A answered valid
        # JSON whose rationale was that sentence and whose label dropped its stance (17 of
        # the 24 round-1 agreements); the retry now says what the rationale is about.
        conversation = prompt.extended(
            Message("assistant", generation.text),
            Message(
                "user",
                f"That answer is not valid: {problem}. Reply again with only the JSON value "
                "that matches the schema. Keep the position you argued; the rationale is about "
                "the passage and the query, never about this message.",
            ),
        )
        try:
            (result,) = engine.generate_json(
                [conversation], schema, max_new_tokens=max_new_tokens, retries=retries - 1
            )
        except MalformedOutputError as exc:
            out.append(
                JsonTurn(None, generation.usage, 1 + exc.attempts, f"malformed answer: {exc}")
            )
            continue
        out.append(JsonTurn(result.value, generation.usage + result.usage, 1 + result.attempts))
    return out
