"""DREAM: two agents with opposing initial stances debate each item, round by round.

Many items advance together: for round r every still-open item's two agent prompts
go to the engine as one batch (one call per distinct model; with two models, the two
calls run at the same time), then each quote is checked against its chunk, agreement
is decided, and agreeing or failed items leave. Items still disagreeing after their R
rounds escalate with the full history, or go to the LLM adjudicator in one batch.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from tribunal.core import InvalidArgumentError, ResourceExhaustedError
from tribunal.core.llm import LLMEngine, Prompt, Usage
from tribunal.entailment import QuoteChecker
from tribunal.prompts import PromptTemplate, get_prompt

from ._turns import (
    AdjudicatorAnswer,
    AgentAnswer,
    adjudicator_prompt,
    agent_prompt,
    generate_turns,
)
from ._types import (
    Adjudication,
    AgentTurn,
    DebateItem,
    DebateLabel,
    DebateOutcome,
    DebateResult,
    DebateRound,
    decide,
)

__all__ = ["DreamDebate"]

MAX_ROUNDS_LIMIT = 5


@dataclass
class _Open:
    """An item still being debated."""

    index: int
    item: DebateItem
    max_rounds: int
    swap: bool
    adjudicate: bool
    rounds: list[DebateRound] = field(default_factory=list)

    @property
    def order(self) -> tuple[str, str]:
        return ("B", "A") if self.swap else ("A", "B")


class DreamDebate:
    """The debate protocol over the LLM engine.

    Args:
        agents: The engines of the two debaters, (m1, m2): m1 plays agent A (initial
            stance relevant) and speaks first, m2 plays B; a swapped item swaps both.
            The same engine twice is the homogeneous debate (one batch per round).
        adjudicator: Engine of the LLM adjudicator; required when any item adjudicates.
        quote_checker: Entailment stage 0, checks each turn's evidence in the chunk.
        max_rounds: Default R (an item's ``max_rounds`` 0 takes it).
        adjudicate: Default for items that do not say.
        swap_stance_order: Default speaking order for items that do not say.
        require_answers: Refuse items without answers (else the query is the answer set).
    """

    def __init__(
        self,
        agents: tuple[LLMEngine[Any], LLMEngine[Any]],
        *,
        adjudicator: LLMEngine[Any] | None = None,
        quote_checker: QuoteChecker | None = None,
        max_rounds: int = 2,
        adjudicate: bool = False,
        swap_stance_order: bool = False,
        require_answers: bool = False,
        max_new_tokens: int = 160,
        json_retries: int = 2,
        max_items_per_request: int = 64,
        max_query_chars: int = 2_000,
        max_chunk_chars: int = 8_000,
        max_answers_per_item: int = 16,
        agent_template: PromptTemplate | None = None,
        adjudicator_template: PromptTemplate | None = None,
        profile: str = "",
    ) -> None:
        if not 1 <= max_rounds <= MAX_ROUNDS_LIMIT:
            raise ValueError(f"max_rounds must be in 1..{MAX_ROUNDS_LIMIT}")
        self.agents = agents
        self.adjudicator = adjudicator
        self.quote_checker = quote_checker or QuoteChecker()
        self.max_rounds = max_rounds
        self.adjudicate_by_default = adjudicate
        self.swap_by_default = swap_stance_order
        self.require_answers = require_answers
        self.max_new_tokens = max_new_tokens
        self.json_retries = json_retries
        self.max_items_per_request = max_items_per_request
        self.max_query_chars = max_query_chars
        self.max_chunk_chars = max_chunk_chars
        self.max_answers_per_item = max_answers_per_item
        self.agent_template = agent_template or get_prompt("debate/agent@1")
        self.adjudicator_template = adjudicator_template or get_prompt("debate/adjudicator@1")
        self.profile = profile

    # ----------------------------------------------------------------- checks
    def validate(self, items: Sequence[DebateItem], prefix: str = "") -> None:
        """Reject bad input before any model runs.

        Raises:
            InvalidArgumentError: naming the field (``items[3].chunk``) and the fix.
            ResourceExhaustedError: more than ``max_items_per_request`` items.
        """
        if len(items) > self.max_items_per_request:
            raise ResourceExhaustedError(
                f"{len(items)} items in one call; at most {self.max_items_per_request} "
                "(debate.max_items_per_request): split the batch"
            )
        for index, item in enumerate(items):
            where = f"{prefix}items[{index}]." if len(items) > 1 or prefix else ""
            self._validate_one(item, where)

    def _validate_one(self, item: DebateItem, where: str) -> None:
        def bad(name: str, message: str) -> InvalidArgumentError:
            return InvalidArgumentError(f"{where}{name} {message}", field=f"{where}{name}")

        if not item.query.strip():
            raise bad("query", "is empty: give the query the chunk is judged against")
        if len(item.query) > self.max_query_chars:
            raise bad("query", f"is longer than {self.max_query_chars} characters")
        if not item.chunk.strip():
            raise bad("chunk", "is empty: give the passage to judge")
        if len(item.chunk) > self.max_chunk_chars:
            raise bad("chunk", f"is longer than {self.max_chunk_chars} characters")
        if self.require_answers and not item.answers:
            raise bad("answers", "is empty: this service judges against reference answers")
        if len(item.answers) > self.max_answers_per_item:
            raise bad(
                "answers", f"has {len(item.answers)} entries; at most {self.max_answers_per_item}"
            )
        if any(not a.strip() for a in item.answers):
            raise bad("answers", "contains an empty answer")
        if item.max_rounds != 0 and not 1 <= item.max_rounds <= MAX_ROUNDS_LIMIT:
            raise bad(
                "max_rounds",
                f"is {item.max_rounds}; use 1..{MAX_ROUNDS_LIMIT}, or 0 for the default "
                f"({self.max_rounds})",
            )
        adjudicate = self.adjudicate_by_default if item.adjudicate is None else item.adjudicate
        if adjudicate and self.adjudicator is None:
            raise bad("adjudicate", "asks for the LLM adjudicator, which is not configured")

    # ----------------------------------------------------------------- public calls
    def assess(self, item: DebateItem) -> DebateResult:
        """Debate one item."""
        return self.assess_many([item])[0]

    def assess_many(self, items: Sequence[DebateItem]) -> list[DebateResult]:
        """Debate many items together; results in input order."""
        out: list[DebateResult | None] = [None] * len(items)
        for index, result in self.stream(items):
            out[index] = result
        return [r for r in out if r is not None]

    def stream(self, items: Sequence[DebateItem]) -> Iterator[tuple[int, DebateResult]]:
        """(input index, result) as items finish: after the round that ends them."""
        self.validate(items)
        started = time.perf_counter()
        pending = [self._open(i, item) for i, item in enumerate(items)]
        number = 0
        while pending:
            number += 1
            self._play_round(pending, number)
            still: list[_Open] = []
            to_adjudicate: list[_Open] = []
            for state in pending:
                last = state.rounds[-1]
                if last.failed or last.agreed:
                    yield state.index, self._finish(state, started)
                elif number == state.max_rounds:
                    if state.adjudicate:
                        to_adjudicate.append(state)
                    else:
                        yield state.index, self._finish(state, started)
                else:
                    still.append(state)
            if to_adjudicate:
                decisions = self.adjudicate_states([(s.item, s.rounds[-1]) for s in to_adjudicate])
                for state, decision in zip(to_adjudicate, decisions, strict=True):
                    yield state.index, self._finish(state, started, decision)
            pending = still

    def adjudicate(
        self, items: Sequence[DebateItem], results: Sequence[DebateResult]
    ) -> list[DebateResult]:
        """Adjudicate finished debates that escalated (others are returned unchanged).

        Lets an evaluation adjudicate the truncated R-round histories of one longer run.
        """
        chosen = [i for i, r in enumerate(results) if r.outcome is DebateOutcome.ESCALATED]
        decisions = self.adjudicate_states([(items[i], results[i].rounds[-1]) for i in chosen])
        out = list(results)
        for index, decision in zip(chosen, decisions, strict=True):
            out[index] = self._with_adjudication(results[index], decision)
        return out

    def adjudicate_states(
        self, cases: Sequence[tuple[DebateItem, DebateRound]]
    ) -> list[Adjudication]:
        """The adjudicator's decision for each (item, final round), as one batch."""
        if not cases:
            return []
        if self.adjudicator is None:
            raise InvalidArgumentError("no LLM adjudicator is configured", field="adjudicate")
        engine = self.adjudicator
        prompts = [
            adjudicator_prompt(self.adjudicator_template, engine, item, last)
            for item, last in cases
        ]
        answers = generate_turns(
            engine,
            prompts,
            AdjudicatorAnswer,
            max_new_tokens=self.max_new_tokens,
            retries=self.json_retries,
        )
        out: list[Adjudication] = []
        for answer in answers:
            value = answer.value
            if isinstance(value, AdjudicatorAnswer):
                out.append(
                    Adjudication(
                        DebateLabel(value.label), value.rationale, engine.model_name, answer.usage
                    )
                )
            else:
                out.append(Adjudication(None, "", engine.model_name, answer.usage, answer.error))
        return out

    # ----------------------------------------------------------------- internals
    def _open(self, index: int, item: DebateItem) -> _Open:
        return _Open(
            index=index,
            item=item,
            max_rounds=item.max_rounds or self.max_rounds,
            swap=self.swap_by_default if item.swap_stance_order is None else item.swap_stance_order,
            adjudicate=self.adjudicate_by_default if item.adjudicate is None else item.adjudicate,
        )

    def _engine_of(self, state: _Open, agent: str) -> LLMEngine[Any]:
        # m1 plays the first speaker: agent A normally, agent B when swapped.
        first = state.order[0]
        return self.agents[0] if agent == first else self.agents[1]

    def _play_round(self, states: list[_Open], number: int) -> None:
        """Every state's two turns of round ``number``, batched per engine."""
        jobs: dict[int, tuple[LLMEngine[Any], list[tuple[int, str, Prompt]]]] = {}
        for position, state in enumerate(states):
            previous = state.rounds[-1] if state.rounds else None
            for agent in state.order:
                engine = self._engine_of(state, agent)
                prompt = agent_prompt(self.agent_template, engine, state.item, agent, previous)
                jobs.setdefault(id(engine), (engine, []))[1].append((position, agent, prompt))

        def run(job: tuple[LLMEngine[Any], list[tuple[int, str, Prompt]]]) -> list[AgentTurn]:
            engine, entries = job
            answers = generate_turns(
                engine,
                [p for _, _, p in entries],
                AgentAnswer,
                max_new_tokens=self.max_new_tokens,
                retries=self.json_retries,
            )
            return [
                self._turn(states[position].item, agent, engine, answer)
                for (position, agent, _), answer in zip(entries, answers, strict=True)
            ]

        batches = list(jobs.values())
        if len(batches) == 1:
            results = [run(batches[0])]
        else:
            # Two models: each has its own lock, so their batches run at the same time.
            with ThreadPoolExecutor(max_workers=len(batches)) as pool:
                results = list(pool.map(run, batches))
        turns: dict[tuple[int, str], AgentTurn] = {}
        for (_, entries), made in zip(batches, results, strict=True):
            for (position, agent, _), turn in zip(entries, made, strict=True):
                turns[(position, agent)] = turn
        for position, state in enumerate(states):
            state.rounds.append(
                DebateRound(number, tuple(turns[(position, agent)] for agent in state.order))
            )

    def _turn(self, item: DebateItem, agent: str, engine: LLMEngine[Any], answer: Any) -> AgentTurn:
        value = answer.value
        if not isinstance(value, AgentAnswer):
            return AgentTurn(
                agent=agent,
                model=engine.model_name,
                label=None,
                usage=answer.usage,
                attempts=answer.attempts,
                error=answer.error,
            )
        match = self.quote_checker.find(item.chunk, value.evidence)
        return AgentTurn(
            agent=agent,
            model=engine.model_name,
            label=DebateLabel(value.label),
            evidence=value.evidence,
            rationale=value.rationale,
            evidence_found=match.found,
            evidence_ratio=match.ratio,
            usage=answer.usage,
            attempts=answer.attempts,
        )

    def _finish(
        self, state: _Open, started: float, adjudication: Adjudication | None = None
    ) -> DebateResult:
        rounds = tuple(state.rounds)
        usage = sum((t.usage for r in rounds for t in r.turns), Usage())
        models = {
            "agent_a": self._engine_of(state, "A").model_name,
            "agent_b": self._engine_of(state, "B").model_name,
        }
        prompts = {"agent": self.agent_template.id}
        if state.adjudicate and self.adjudicator is not None:
            models["adjudicator"] = self.adjudicator.model_name
            prompts["adjudicator"] = self.adjudicator_template.id
        result = DebateResult(
            item_id=state.item.item_id,
            max_rounds=state.max_rounds,
            rounds=rounds,
            usage=usage,
            seconds=time.perf_counter() - started,
            models=models,
            prompts=prompts,
            **decide(rounds, state.max_rounds),  # type: ignore[arg-type]
        )
        return result if adjudication is None else self._with_adjudication(result, adjudication)

    def _with_adjudication(self, result: DebateResult, adjudication: Adjudication) -> DebateResult:
        common: dict[str, Any] = {
            "adjudication": adjudication,
            "usage": result.usage + adjudication.usage,
            "models": {**result.models, "adjudicator": adjudication.model},
            "prompts": {**result.prompts, "adjudicator": self.adjudicator_template.id},
        }
        if adjudication.label is None:
            return replace(
                result,
                outcome=DebateOutcome.FAILED,
                label=None,
                error=f"adjudicator: {adjudication.error}",
                **common,
            )
        return replace(
            result, outcome=DebateOutcome.ADJUDICATED, label=adjudication.label, **common
        )
