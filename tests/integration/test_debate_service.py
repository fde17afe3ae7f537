"""The debate service on real models through a real gRPC server (llama.cpp where
`make llm` built it, else transformers).

Agents are the tiny profile's 0.5B model (fast enough for CI); the malformed-output
path uses the real 135M model with a 8-token answer bound, which cannot hold the
JSON object, so every attempt (the first and the engine's retries) is invalid.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from tribunal.core import Settings, load_settings
from tribunal.debate import DebateItem, DebateOutcome, build_debate
from tribunal.debate.servicer import build_host
from tribunal.v1 import common_pb2, debate_pb2, debate_pb2_grpc

from ._llm_backend import LLM_BACKEND

CHUNK = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris, France. It was built "
    "from 1887 to 1889 as the entrance arch of the 1889 World's Fair."
)


def _settings(agent: str, **debate: Any) -> Settings:
    base = load_settings("tiny")
    assert base.roles is not None
    roles = {**base.roles.model_dump(), "debate_agents": [agent, agent], "adjudicator": agent}
    return load_settings(
        "tiny",
        llm_backend=LLM_BACKEND,
        roles=roles,
        server={"port": 0, "metrics_port": None},
        llm={"n_threads": 1},
        debate=debate,
    )


@pytest.fixture(scope="module")
def stub() -> Iterator[debate_pb2_grpc.DebateServiceStub]:
    host = build_host(_settings("llm_weak", max_new_tokens=64, json_retries=1))
    port = host.start()
    assert host.wait_until_ready(600), host.load_error
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield debate_pb2_grpc.DebateServiceStub(channel)
    host.stop(0)


def _consistent(result: debate_pb2.AssessResponse, max_rounds: int) -> None:
    """What must hold of any finished debate, whatever the model said."""
    assert 1 <= len(result.rounds) <= max_rounds
    for number, one in enumerate(result.rounds, start=1):
        assert one.number == number
        assert [t.agent for t in one.turns] == ["A", "B"]
        assert all(t.model == "qwen2.5-coder-0.5b-instruct" for t in one.turns)
        assert all(t.usage.prompt_tokens > 0 for t in one.turns)
    last = result.rounds[-1]
    labels = {t.label for t in last.turns}
    if result.outcome == debate_pb2.DEBATE_OUTCOME_AGREED:
        assert len(labels) == 1
        assert result.label == labels.pop()
    elif result.outcome == debate_pb2.DEBATE_OUTCOME_ESCALATED:
        assert len(result.rounds) == max_rounds
        assert len(labels) == 2
        assert result.label == common_pb2.LABEL_UNSPECIFIED
        # No earlier round agreed either.
        assert all(len({t.label for t in r.turns}) == 2 for r in result.rounds)
    else:
        assert result.outcome == debate_pb2.DEBATE_OUTCOME_FAILED
        assert result.error
    assert result.usage.prompt_tokens == sum(
        t.usage.prompt_tokens for r in result.rounds for t in r.turns
    )
    assert result.provenance.prompts["agent"] == "debate/agent@1"


@pytest.mark.models
@pytest.mark.timeout(1500)  # six real 0.5B turns: ~30 s on a quiet machine, minutes on a busy one
def test_assess_and_batch_assess_over_grpc(stub: debate_pb2_grpc.DebateServiceStub) -> None:
    request = debate_pb2.AssessRequest(
        query="when was the eiffel tower built",
        chunk=CHUNK,
        answers=["1887 to 1889"],
        max_rounds=1,
        item_id="eiffel",
    )
    result = stub.Assess(request, timeout=1200)
    assert result.item_id == "eiffel"
    _consistent(result, 1)
    assert result.milliseconds > 0

    other = debate_pb2.AssessRequest(
        query="how tall is mount everest", chunk=CHUNK, max_rounds=1, item_id="everest"
    )
    streamed = list(
        stub.BatchAssess(debate_pb2.BatchAssessRequest(items=[request, other]), timeout=1200)
    )
    assert sorted(r.index for r in streamed) == [0, 1]
    by_index = {r.index: r.result for r in streamed}
    assert by_index[1].item_id == "everest"
    _consistent(by_index[1], 1)
    # Same item, same greedy debate.
    assert by_index[0].outcome == result.outcome
    assert by_index[0].label == result.label


@pytest.mark.models
@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"query": ""}, "query"),
        ({"chunk": " "}, "chunk"),
        ({"max_rounds": 6}, "max_rounds"),
    ],
)
def test_bad_requests_are_invalid_argument(
    stub: debate_pb2_grpc.DebateServiceStub, change: dict[str, Any], field: str
) -> None:
    fields: dict[str, Any] = {"query": "q", "chunk": CHUNK, **change}
    with pytest.raises(grpc.RpcError) as caught:
        stub.Assess(debate_pb2.AssessRequest(**fields), timeout=60)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (caught.value.details() or "")


@pytest.mark.models
def test_a_model_that_cannot_finish_its_json_fails_the_item_not_labels_it() -> None:
    # SmolLM2-135M with room for 8 tokens: the JSON object is always cut off.
    debate = build_debate(_settings("llm_tiny", max_new_tokens=8, json_retries=1))
    result = debate.assess(DebateItem(query="when was the eiffel tower built", chunk=CHUNK))
    assert result.outcome is DebateOutcome.FAILED
    assert result.label is None
    failed = [t for t in result.rounds[0].turns if t.label is None]
    assert failed
    assert all(t.attempts == 2 and "malformed" in t.error for t in failed)
    assert len(result.rounds) == 1
