"""The debate gRPC adapter through a real gRPC server, on the ScriptedEngine TEST DOUBLE
(tests/unit/_debate_engine.py) so that outcomes are known; real models are in
tests/integration/test_debate_service.py."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import pytest
from tribunal.core import ServerSettings
from tribunal.core.server import ServiceBinding, ServiceHost
from tribunal.debate._debate import DreamDebate
from tribunal.debate.servicer import SERVICE_NAME, DebateServicer
from tribunal.v1 import common_pb2, debate_pb2, debate_pb2_grpc

from ._debate_engine import ScriptedEngine, agent_and_round, turn_json


def _script(text: str) -> str:
    if "Final arguments" in text:
        return '{"label": "relevant", "rationale": "the adjudicator read both"}'
    agent, _number = agent_and_round(text)
    # Items whose query says "agree" agree in round 1; the others never agree.
    if "Query: agree" in text:
        return turn_json("relevant", evidence="Paris")
    return turn_json("relevant" if agent == "A" else "irrelevant", evidence="not in the chunk")


@pytest.fixture(scope="module")
def stub() -> Iterator[debate_pb2_grpc.DebateServiceStub]:
    engine = ScriptedEngine(_script)
    servicer = DebateServicer(
        DreamDebate((engine, engine), adjudicator=engine, max_rounds=2, profile="test")
    )
    host = ServiceHost(
        ServerSettings(port=0, metrics_port=None),
        name="debate",
        bindings=[
            ServiceBinding(
                SERVICE_NAME,
                lambda server: debate_pb2_grpc.add_DebateServiceServicer_to_server(  # type: ignore[no-untyped-call]
                    servicer, server
                ),
            )
        ],
    )
    port = host.start()
    assert host.wait_until_ready(30)
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield debate_pb2_grpc.DebateServiceStub(channel)
    host.stop(0)


def test_assess_maps_every_field(stub: debate_pb2_grpc.DebateServiceStub) -> None:
    agreed = stub.Assess(
        debate_pb2.AssessRequest(query="agree", chunk="Paris is in France.", item_id="x"),
        timeout=30,
    )
    assert agreed.outcome == debate_pb2.DEBATE_OUTCOME_AGREED
    assert agreed.label == common_pb2.LABEL_RELEVANT
    assert agreed.item_id == "x"
    (only,) = agreed.rounds
    assert only.number == 1
    assert [t.agent for t in only.turns] == ["A", "B"]
    assert all(t.evidence == "Paris" and t.evidence_found for t in only.turns)
    assert only.turns[0].model == "scripted"
    assert agreed.usage.prompt_tokens == sum(t.usage.prompt_tokens for t in only.turns)
    assert agreed.provenance.profile == "test"
    assert agreed.provenance.prompts["agent"] == "debate/agent@1"

    escalated = stub.Assess(
        debate_pb2.AssessRequest(query="q", chunk="Paris is in France.", max_rounds=3), timeout=30
    )
    assert escalated.outcome == debate_pb2.DEBATE_OUTCOME_ESCALATED
    assert escalated.label == common_pb2.LABEL_UNSPECIFIED
    assert len(escalated.rounds) == 3
    assert not escalated.rounds[0].turns[1].evidence_found

    adjudicated = stub.Assess(
        debate_pb2.AssessRequest(
            query="q",
            chunk="Paris is in France.",
            options=debate_pb2.DebateOptions(adjudicate=True, swap_stance_order=True),
        ),
        timeout=30,
    )
    assert adjudicated.outcome == debate_pb2.DEBATE_OUTCOME_ADJUDICATED
    assert adjudicated.label == common_pb2.LABEL_RELEVANT
    assert adjudicated.adjudication == "the adjudicator read both"
    assert len(adjudicated.rounds) == 2  # the configured default R
    assert [t.agent for t in adjudicated.rounds[0].turns] == ["B", "A"]


def test_batch_assess_streams_items_as_they_finish(
    stub: debate_pb2_grpc.DebateServiceStub,
) -> None:
    items = [
        debate_pb2.AssessRequest(query="q", chunk="c", max_rounds=2, item_id="slow"),
        debate_pb2.AssessRequest(query="agree", chunk="c", item_id="fast"),
    ]
    streamed = list(stub.BatchAssess(debate_pb2.BatchAssessRequest(items=items), timeout=30))
    # The item that agrees in round 1 comes back first, with its request index.
    assert [(r.index, r.result.item_id) for r in streamed] == [(1, "fast"), (0, "slow")]


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"query": "", "chunk": "c"}, "query"),
        ({"query": "q", "chunk": ""}, "chunk"),
        ({"query": "q", "chunk": "c", "max_rounds": 9}, "max_rounds"),
    ],
)
def test_bad_input_is_invalid_argument_naming_the_field(
    stub: debate_pb2_grpc.DebateServiceStub, request_fields: dict[str, object], field: str
) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stub.Assess(debate_pb2.AssessRequest(**request_fields), timeout=30)  # type: ignore[arg-type]
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert field in (caught.value.details() or "")
    bad = debate_pb2.AssessRequest(**request_fields)  # type: ignore[arg-type]
    good = debate_pb2.AssessRequest(query="q", chunk="c")
    with pytest.raises(grpc.RpcError) as caught:
        list(stub.BatchAssess(debate_pb2.BatchAssessRequest(items=[good, bad]), timeout=30))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"items[1].{field}" in (caught.value.details() or "")
