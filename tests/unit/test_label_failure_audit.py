"""A debate that fails is audited as a stage failure: failed stage, error kind, message.

The debate service is the real ``DebateServicer`` and ``DreamDebate`` on a real gRPC
server, its agents on the ScriptedEngine TEST DOUBLE (tests/unit/_debate_engine.py):
agent B's answer is never valid JSON, which a real small model cannot be made to do on
demand. The gateway's ``LabelPipeline`` calls it through the gRPC transport and writes
the audit row and the escalation to a real SQLite store.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tribunal.core import ServerSettings, load_settings
from tribunal.core.server import ServiceBinding, ServiceHost
from tribunal.core.storage import Database
from tribunal.debate._debate import DreamDebate
from tribunal.debate.servicer import SERVICE_NAME, DebateServicer
from tribunal.gateway import LabelPipeline
from tribunal.gateway._grpc_transport import GrpcTransport
from tribunal.v1 import common_pb2, debate_pb2_grpc, gateway_pb2

from ._debate_engine import ScriptedEngine, agent_and_round, turn_json


def _agent_b_breaks_its_json(text: str) -> str:
    if "Final arguments" in text:
        return '{"label": "relevant", "rationale": "read both"}'
    agent, _ = agent_and_round(text)
    return turn_json("relevant") if agent == "A" else '{"label": "relevant", "evidence": '


@pytest.fixture(scope="module")
def debate_address() -> Iterator[str]:
    engine = ScriptedEngine(_agent_b_breaks_its_json)
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
    yield f"127.0.0.1:{port}"
    host.stop(0)


def test_a_failed_debate_goes_to_humans_and_its_audit_row_names_the_failure(
    debate_address: str, tmp_path: Path
) -> None:
    settings = load_settings("tiny")
    store = Database(f"sqlite:///{tmp_path / 'audit.db'}")
    store.create_schema()
    transport = GrpcTransport(
        {"debate": debate_address}, max_message_bytes=settings.server.max_message_bytes
    )
    pipeline = LabelPipeline(settings.gateway, transport, store=store)
    try:
        response = pipeline.label(
            gateway_pb2.LabelRequest(
                query="Where is Paris?",
                chunk="Paris is the capital of France.",
                item_id="item-1",
                mode=gateway_pb2.LABEL_MODE_DEBATE,
            )
        )
        assert response.label == common_pb2.LABEL_UNSPECIFIED
        assert response.source == gateway_pb2.LABEL_SOURCE_HUMAN_QUEUE
        assert response.escalation_id
        record = store.decision(response.audit_id)
        assert record.decision == "ESCALATED"
        assert record.failed_stage == "debate"
        assert record.reason == "stage_error:debate"
        assert record.detail["error_kind"] == "STAGE_ERROR"
        # The message says which agent in which round, and why (the engine's JSON error).
        assert record.error.startswith("round 1, agent B:"), record.error
        (queued,) = store.escalations()
        assert queued.id == response.escalation_id
        assert queued.reason == "stage_error:debate"
        # The debate's history stays with the escalation for the reviewer.
        assert queued.history["outcome"] == "DEBATE_OUTCOME_FAILED"
        assert queued.history["error"] == record.error
    finally:
        transport.close()
        store.close()
