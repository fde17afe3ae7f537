"""The DREAM protocol: stances, agreement, escalation, failures, batching, options.

The engine is the ``ScriptedEngine`` TEST DOUBLE (tests/unit/_debate_engine.py): a
real LLMEngine subclass whose answers are scripted per (agent, round), because a real
small model cannot be steered into agreeing or disagreeing on demand.
"""

from __future__ import annotations

import pytest
from tribunal.core import InvalidArgumentError, ResourceExhaustedError
from tribunal.debate import DebateItem, DebateLabel, DebateOutcome
from tribunal.debate._debate import DreamDebate

from ._debate_engine import ScriptedEngine, agent_and_round, by_turn, turn_json

ITEM = DebateItem(
    query="capital of France",
    chunk="Paris is the capital of France.",
    answers=("Paris",),
    item_id="q1",
)


def debate_with(engine: ScriptedEngine, **options: object) -> DreamDebate:
    return DreamDebate((engine, engine), adjudicator=engine, **options)  # type: ignore[arg-type]


def test_agreement_in_round_1_stops_the_debate() -> None:
    engine = ScriptedEngine(by_turn({("A", 1): "irrelevant", ("B", 1): "irrelevant"}))
    result = debate_with(engine, max_rounds=3).assess(ITEM)
    assert result.outcome is DebateOutcome.AGREED
    assert result.label is DebateLabel.IRRELEVANT
    assert [r.number for r in result.rounds] == [1]
    assert len(engine.calls) == 1
    assert len(engine.calls[0]) == 2
    assert result.item_id == "q1"
    assert result.usage.prompt_tokens > 0
    assert result.usage.completion_tokens > 0


def test_disagreement_escalates_with_both_rounds_history() -> None:
    labels = {("A", 1): "relevant", ("B", 1): "irrelevant"}
    labels |= {("A", 2): "relevant", ("B", 2): "irrelevant"}
    engine = ScriptedEngine(by_turn(labels))
    result = debate_with(engine, max_rounds=2).assess(ITEM)
    assert result.outcome is DebateOutcome.ESCALATED
    assert result.label is None
    assert [r.number for r in result.rounds] == [1, 2]
    assert [[t.agent for t in r.turns] for r in result.rounds] == [["A", "B"], ["A", "B"]]
    assert [t.label for t in result.rounds[1].turns] == [
        DebateLabel.RELEVANT,
        DebateLabel.IRRELEVANT,
    ]
    # Round 2 sees round 1's arguments, each agent's own marked "(you)".
    round_two = engine.calls[1]
    a_prompt = next(p for p in round_two if agent_and_round(p)[0] == "A")
    assert "Arguments of round 1" in a_prompt
    assert 'Agent A (you): label relevant; evidence "Paris"' in a_prompt
    assert "Agent B: label irrelevant" in a_prompt


def test_round_1_states_each_agents_stance_and_opponent() -> None:
    engine = ScriptedEngine(by_turn({("A", 1): "relevant", ("B", 1): "relevant"}))
    debate_with(engine).assess(ITEM)
    prompts = {agent_and_round(p)[0]: p for p in engine.calls[0]}
    assert "You are Agent A; your opponent is Agent B" in prompts["A"]
    assert "Your initial stance: the passage is relevant" in prompts["A"]
    assert "You are Agent B; your opponent is Agent A" in prompts["B"]
    assert "Your initial stance: the passage is irrelevant" in prompts["B"]
    assert "Answers: Paris" in prompts["A"]


def test_agreement_in_a_later_round_and_the_query_as_its_own_answer_set() -> None:
    labels = {("A", 1): "relevant", ("B", 1): "irrelevant"}
    labels |= {("A", 2): "relevant", ("B", 2): "relevant"}
    engine = ScriptedEngine(by_turn(labels))
    item = DebateItem(query="capital of France", chunk=ITEM.chunk)
    result = debate_with(engine, max_rounds=3).assess(item)
    assert (result.outcome, result.label) == (DebateOutcome.AGREED, DebateLabel.RELEVANT)
    assert len(result.rounds) == 2
    assert "Answers: capital of France" in engine.calls[0][0]


def test_a_malformed_output_is_retried_then_recorded_as_a_failure_never_a_label() -> None:
    def script(text: str) -> str:
        if (
            "Agent B" in text
            and "Paris is the capital of France." in text
            and "You are Agent B" in text
        ):
            return "I think it is irrelevant."  # never JSON, not even when told
        return turn_json("relevant")

    engine = ScriptedEngine(script)
    other = DebateItem(query="capital of Spain", chunk="Madrid is Spain's capital.", item_id="q2")
    first, second = debate_with(engine, json_retries=2).assess_many([ITEM, other])
    assert first.outcome is DebateOutcome.FAILED
    assert first.label is None
    bad = first.rounds[0].turn("B")
    assert bad.label is None
    assert bad.attempts == 3
    assert "malformed" in bad.error
    assert "agent B" in first.error
    # The retry conversation told the model what was wrong.
    retry = engine.calls[1][0]
    assert "That answer is not valid" in retry
    assert "I think it is irrelevant." in retry
    # ...and what the rationale is about: told only "no JSON object", a 0.5B agent echoed
    # that sentence as its rationale and dropped its stance (docs/results.md, Debate).
    assert "Keep the position you argued" in retry
    assert "never about this message" in retry
    # The other item of the same batch is unaffected.
    assert (second.outcome, second.label) == (DebateOutcome.AGREED, DebateLabel.RELEVANT)


def test_an_answer_fixed_on_retry_is_used() -> None:
    answers = iter(["oops", turn_json("relevant"), turn_json("relevant")])
    engine = ScriptedEngine(lambda text: next(answers))
    result = debate_with(engine, json_retries=1).assess(ITEM)
    assert result.outcome is DebateOutcome.AGREED
    assert sorted(t.attempts for t in result.rounds[0].turns) == [1, 2]


def test_quotes_are_checked_against_the_chunk() -> None:
    def script(text: str) -> str:
        agent, _ = agent_and_round(text)
        quote = "capital of France" if agent == "A" else "Berlin is lovely in spring"
        return turn_json("relevant", evidence=quote)

    result = debate_with(ScriptedEngine(script)).assess(ITEM)
    a, b = result.rounds[0].turns
    assert a.evidence_found
    assert a.evidence_ratio == 100.0
    assert not b.evidence_found


def test_the_adjudicator_decides_when_configured() -> None:
    labels = {("A", 1): "relevant", ("B", 1): "irrelevant", ("J", 0): "irrelevant"}
    engine = ScriptedEngine(by_turn(labels))
    result = debate_with(engine, max_rounds=1, adjudicate=True).assess(ITEM)
    assert result.outcome is DebateOutcome.ADJUDICATED
    assert result.label is DebateLabel.IRRELEVANT
    assert result.adjudication is not None
    assert result.adjudication.rationale == "judged"
    assert "Final arguments (round 1)" in engine.calls[-1][0]
    assert result.prompts == {"agent": "debate/agent@1", "adjudicator": "debate/adjudicator@1"}
    # Per item, the request decides.
    item = DebateItem(query=ITEM.query, chunk=ITEM.chunk, adjudicate=False)
    assert debate_with(engine, max_rounds=1, adjudicate=True).assess(item).outcome is (
        DebateOutcome.ESCALATED
    )


def test_rounds_of_many_items_are_batched_into_one_call_per_round() -> None:
    labels = {("A", 1): "relevant", ("B", 1): "irrelevant"}
    labels |= {("A", 2): "relevant", ("B", 2): "irrelevant"}
    engine = ScriptedEngine(by_turn(labels), batch_size=64)
    items = [DebateItem(query=f"q{i}", chunk=f"chunk {i}", item_id=str(i)) for i in range(5)]
    streamed = list(debate_with(engine, max_rounds=2).stream(items))
    assert [len(call) for call in engine.calls] == [10, 10]
    assert sorted(i for i, _ in streamed) == list(range(5))
    assert all(r.outcome is DebateOutcome.ESCALATED for _, r in streamed)


def test_heterogeneous_agents_and_the_stance_order_swap() -> None:
    labels = {("A", 1): "relevant", ("B", 1): "irrelevant"}
    first = ScriptedEngine(by_turn(labels), name="m1")
    second = ScriptedEngine(by_turn(labels), name="m2")
    debate = DreamDebate((first, second), max_rounds=1)
    plain = debate.assess(ITEM)
    assert [(t.agent, t.model) for t in plain.rounds[0].turns] == [("A", "m1"), ("B", "m2")]
    assert plain.models == {"agent_a": "m1", "agent_b": "m2"}
    swapped = debate.assess(DebateItem(query=ITEM.query, chunk=ITEM.chunk, swap_stance_order=True))
    assert [(t.agent, t.model) for t in swapped.rounds[0].turns] == [("B", "m1"), ("A", "m2")]


def test_truncating_a_longer_debate_gives_the_shorter_one() -> None:
    labels = {("A", 1): "relevant", ("B", 1): "irrelevant"}
    labels |= {("A", 2): "irrelevant", ("B", 2): "irrelevant"}
    engine = ScriptedEngine(by_turn(labels))
    long = debate_with(engine, max_rounds=3).assess(ITEM)
    short = debate_with(engine, max_rounds=1).assess(ITEM)
    cut = long.truncated(1)

    def turns(result: object) -> list[tuple[str, object, str]]:
        return [(t.agent, t.label, t.evidence) for r in result.rounds for t in r.turns]  # type: ignore[attr-defined]

    assert (cut.outcome, cut.label, turns(cut)) == (short.outcome, short.label, turns(short))
    assert long.truncated(2).outcome is DebateOutcome.AGREED


@pytest.mark.parametrize(
    ("item", "field"),
    [
        (DebateItem(query=" ", chunk="text"), "query"),
        (DebateItem(query="q", chunk=""), "chunk"),
        (DebateItem(query="q", chunk="text", max_rounds=6), "max_rounds"),
        (DebateItem(query="q", chunk="text", max_rounds=-1), "max_rounds"),
        (DebateItem(query="q", chunk="text", answers=("",)), "answers"),
    ],
)
def test_bad_input_names_the_field(item: DebateItem, field: str) -> None:
    debate = debate_with(ScriptedEngine(by_turn({})))
    with pytest.raises(InvalidArgumentError) as caught:
        debate.assess(item)
    assert caught.value.field == field
    with pytest.raises(InvalidArgumentError) as caught:
        debate.assess_many([ITEM, item])
    assert caught.value.field == f"items[1].{field}"


def test_answers_required_adjudicator_missing_and_batch_too_large() -> None:
    engine = ScriptedEngine(by_turn({}))
    with pytest.raises(InvalidArgumentError, match="answers"):
        debate_with(engine, require_answers=True).assess(DebateItem(query="q", chunk="c"))
    with pytest.raises(InvalidArgumentError, match="adjudicator") as caught:
        DreamDebate((engine, engine)).assess(DebateItem(query="q", chunk="c", adjudicate=True))
    assert caught.value.field == "adjudicate"
    with pytest.raises(ResourceExhaustedError):
        debate_with(engine, max_items_per_request=2).assess_many([ITEM] * 3)
    assert engine.calls == []  # nothing ran
