"""The gateway over real gRPC against scripted stages: every fault path falls back.

The stages here are scripted servicers (tests/integration/_scripted_stages.py)
so each failure can be provoked on demand; tests/integration/test_gateway_e2e.py
runs the real services.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import grpc
import pytest
from tribunal.core import load_settings
from tribunal.core.server import ServiceHost
from tribunal.core.storage import Database
from tribunal.gateway.servicer import build_host
from tribunal.kb import answer_sha256
from tribunal.v1 import common_pb2, debate_pb2, gateway_pb2, gateway_pb2_grpc, retrieval_pb2

from tests.integration import _scripted_stages
from tests.integration._scripted_stages import KB, Script


@dataclass
class Gateway:
    stub: gateway_pb2_grpc.GatewayServiceStub
    script: Script
    db: Database
    host: ServiceHost


def _gateway(database_url: str, **gateway: object) -> Iterator[Gateway]:
    script = Script()
    stages = _scripted_stages.start(script)
    address = f"127.0.0.1:{stages.port}"
    settings = load_settings(
        "tiny",
        server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
        database_url=database_url,
        confidence=script.confidence_settings,
        gateway={
            "kb_trusted_keys": script.trusted_keys,
            "discovery": "grpc",
            "addresses": dict.fromkeys(
                ("retrieval", "ensemble", "entailment", "confidence", "debate"), address
            ),
            "retry_backoff_s": 0.01,
            "label_mode": "cascade",  # the DESIGN default; the tiny profile picks judge
            **gateway,
        },
    )
    host = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(20), host.load_error
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield Gateway(
            gateway_pb2_grpc.GatewayServiceStub(channel), script, Database(database_url), host
        )
    finally:
        channel.close()
        host.stop(0)
        stages.stop(0)


@pytest.fixture
def gw(database_url: str) -> Iterator[Gateway]:
    yield from _gateway(
        database_url,
        stage_timeout_s={
            "confidence": 0.5,
            "ensemble": 5.0,
            "entailment": 5.0,
            "retrieval": 5.0,
            "debate": 5.0,
        },
    )


def _ask(
    gw: Gateway, query: str = "incubation period?", timeout: float = 20.0
) -> gateway_pb2.AnswerResponse:
    return gw.stub.Answer(gateway_pb2.AnswerRequest(query=query, collection="faq"), timeout=timeout)


def test_accept_returns_the_kb_answer_verbatim_with_evidence_and_audit(gw: Gateway) -> None:
    response = _ask(gw)
    assert response.decision == common_pb2.DECISION_ACCEPT
    assert response.answer == KB[0].answer
    assert response.kb_entry_id == "faq-1"
    assert response.confidence == pytest.approx(0.9)
    assert response.threshold == 0.5
    assert [e.chunk_id for e in response.evidence] == ["c1"]
    assert response.evidence_policy == "verified"
    assert response.answer_sha256 == answer_sha256(KB[0].answer)
    assert response.kb_version == 7
    assert response.checker_version == _scripted_stages.CHECKER_VERSION
    # The entry's evidence was verified when it was written: no entailment call per query.
    assert {s.stage for s in response.latencies} == {"retrieval", "ensemble", "confidence"}
    assert "entailment" not in gw.script.calls
    record = gw.db.decision(response.audit_id)
    assert record.decision == "ACCEPT"
    assert record.kb_entry_id == "faq-1"
    assert record.candidate_ids == ("faq-1", "faq-2")
    signals = record.signals["faq-1"]["signals"]
    assert signals["ensemble_p_match"] == pytest.approx(0.9)
    assert signals["supporting_passages"] == 1
    assert signals["retrieval_rank"] == 1
    # faq-2 has no supporting chunks: its entailment signal is missing, not zero.
    assert "entailment_p_entail" not in record.signals["faq-2"]["signals"]
    assert record.versions["ensemble"]["artifact"] == "test-1"
    assert record.versions["confidence"]["calibrator"].startswith("temperature-")
    # The collection version the KB's writer signed, and the key that signed it.
    assert record.versions["kb"] == {
        "collection": "faq",
        "version": 7,
        "content": "kb-scripted000000",
        "key_id": gw.script.signer.key_id,
        "retrieval_model": _scripted_stages.RETRIEVAL_MODEL,
    }
    assert record.detail["served"]["evidence_policy"] == "verified"
    assert record.detail["served"]["answer_sha256"] == response.answer_sha256


def test_low_confidence_falls_back_with_the_configured_text(gw: Gateway) -> None:
    gw.script.p_match = 0.2
    response = _ask(gw)
    assert response.decision == common_pb2.DECISION_FALLBACK
    assert response.fallback_reason == gateway_pb2.FALLBACK_REASON_LOW_CONFIDENCE
    assert response.answer.startswith("I can't answer that")
    assert not response.kb_entry_id
    assert response.confidence == pytest.approx(0.2)
    assert gw.db.decision(response.audit_id).reason == "LOW_CONFIDENCE"


def test_no_candidate(gw: Gateway) -> None:
    gw.script.hits = []
    response = _ask(gw)
    assert response.fallback_reason == gateway_pb2.FALLBACK_REASON_NO_CANDIDATE


def test_unavailable_is_retried_then_answered(gw: Gateway) -> None:
    gw.script.behaviour["ensemble"] = "unavailable:2"
    response = _ask(gw)
    assert response.decision == common_pb2.DECISION_ACCEPT
    assert gw.script.calls["ensemble"] == 3


def test_unavailable_past_the_retries_falls_back(gw: Gateway) -> None:
    gw.script.behaviour["ensemble"] = "unavailable:9"
    response = _ask(gw)
    assert response.decision == common_pb2.DECISION_FALLBACK
    assert response.fallback_reason == gateway_pb2.FALLBACK_REASON_STAGE_ERROR
    assert response.failed_stage == "ensemble"
    assert gw.script.calls["ensemble"] == 3  # 1 + gateway.retries (2)
    record = gw.db.decision(response.audit_id)
    assert record.failed_stage == "ensemble"
    assert "unavailable" in record.error


def test_internal_errors_are_not_retried(gw: Gateway) -> None:
    gw.script.behaviour["ensemble"] = "error"
    response = _ask(gw)
    assert (response.fallback_reason, response.failed_stage) == (
        gateway_pb2.FALLBACK_REASON_STAGE_ERROR,
        "ensemble",
    )
    assert gw.script.calls["ensemble"] == 1


def test_a_stage_past_its_timeout_falls_back(gw: Gateway) -> None:
    from tribunal.gateway._metrics import DECISIONS

    before = DECISIONS.labels("answer", "FALLBACK", "STAGE_TIMEOUT")._value.get()
    gw.script.behaviour["confidence"] = "slow:2"
    response = _ask(gw)
    assert response.fallback_reason == gateway_pb2.FALLBACK_REASON_STAGE_TIMEOUT
    assert response.failed_stage == "confidence"
    # The dashboard's fallback rate counts it.
    assert DECISIONS.labels("answer", "FALLBACK", "STAGE_TIMEOUT")._value.get() == before + 1


def test_the_client_deadline_is_split_across_stages(gw: Gateway) -> None:
    gw.script.behaviour["ensemble"] = "slow:3"
    # 1.5 s in all: the ensemble gets its share and the gateway still answers in time.
    response = _ask(gw, timeout=1.5)
    assert response.fallback_reason == gateway_pb2.FALLBACK_REASON_STAGE_TIMEOUT
    assert response.failed_stage == "ensemble"


@pytest.mark.parametrize("stage", ["retrieval", "ensemble", "confidence"])
def test_malformed_responses_fall_back(gw: Gateway, stage: str) -> None:
    gw.script.behaviour[stage] = "malformed"
    response = _ask(gw)
    assert response.decision == common_pb2.DECISION_FALLBACK
    assert response.fallback_reason == gateway_pb2.FALLBACK_REASON_MALFORMED_RESPONSE
    assert response.failed_stage == stage
    assert gw.db.decision(response.audit_id).reason == "MALFORMED_RESPONSE"


def test_caller_mistakes_are_errors_not_decisions(gw: Gateway) -> None:
    with pytest.raises(grpc.RpcError) as empty:
        _ask(gw, query="  ")
    assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "query is empty" in empty.value.details()
    with pytest.raises(grpc.RpcError) as long:
        _ask(gw, query="x" * 5000)
    assert long.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_query_chars" in long.value.details()
    gw.script.behaviour["retrieval"] = "not_found"
    with pytest.raises(grpc.RpcError) as missing:
        _ask(gw)
    assert missing.value.code() == grpc.StatusCode.NOT_FOUND
    assert gw.db.decisions() == []


def test_an_unwritable_audit_store_never_accepts(gw: Gateway) -> None:
    from sqlalchemy import text

    with gw.db.engine.begin() as connection:
        connection.execute(text("ALTER TABLE audit_decisions RENAME TO audit_moved"))
    response = _ask(gw)
    assert response.decision == common_pb2.DECISION_FALLBACK
    assert response.failed_stage == "audit"
    assert not response.audit_id


# -- Label ---------------------------------------------------------------------------------


def _label(
    gw: Gateway, mode: int = 0, chunk: str = "Symptoms appear after 2-14 days."
) -> gateway_pb2.LabelResponse:
    return gw.stub.Label(
        gateway_pb2.LabelRequest(
            query="incubation period", chunk=chunk, answers=["2-14 days"], mode=mode, item_id="i-1"
        ),
        timeout=20,
    )


def test_label_cascade_confident_judges_skip_the_debate(gw: Gateway) -> None:
    response = _label(gw)
    assert (response.label, response.source) == (
        common_pb2.LABEL_RELEVANT,
        gateway_pb2.LABEL_SOURCE_JUDGES,
    )
    assert response.p_relevant == pytest.approx(0.9)
    assert "debate" not in gw.script.calls
    assert gw.db.decision(response.audit_id).decision == "RELEVANT"


def test_label_cascade_unsure_judges_ask_the_debate(gw: Gateway) -> None:
    gw.script.p_match = 0.5
    response = _label(gw)
    assert (response.label, response.source) == (
        common_pb2.LABEL_RELEVANT,
        gateway_pb2.LABEL_SOURCE_DEBATE,
    )
    assert response.debate.outcome == debate_pb2.DEBATE_OUTCOME_AGREED
    assert response.usage.prompt_tokens == 50 + 100  # the relevance judge's, then the debate's


def test_label_persistent_disagreement_goes_to_humans(gw: Gateway) -> None:
    gw.script.debate_outcome = debate_pb2.DEBATE_OUTCOME_ESCALATED
    response = _label(gw, mode=gateway_pb2.LABEL_MODE_DEBATE)
    assert response.label == common_pb2.LABEL_UNSPECIFIED
    assert response.source == gateway_pb2.LABEL_SOURCE_HUMAN_QUEUE
    assert "ensemble" not in gw.script.calls  # debate mode: DREAM on every item
    queued = gw.db.escalations()
    assert [e.id for e in queued] == [response.escalation_id]
    assert queued[0].history["outcome"] == "DEBATE_OUTCOME_ESCALATED"
    assert _label(gw, mode=gateway_pb2.LABEL_MODE_DEBATE).escalation_id == response.escalation_id
    assert len(gw.db.escalations()) == 1


def test_label_stage_failure_is_never_a_guess(gw: Gateway) -> None:
    gw.script.p_match = 0.5
    gw.script.behaviour["debate"] = "error"
    response = _label(gw)
    assert response.label == common_pb2.LABEL_UNSPECIFIED
    assert response.source == gateway_pb2.LABEL_SOURCE_HUMAN_QUEUE
    assert gw.db.escalations()[0].reason == "stage_error:debate"


def test_label_judge_mode_and_bad_input(gw: Gateway) -> None:
    gw.script.p_match = 0.6
    response = _label(gw, mode=gateway_pb2.LABEL_MODE_JUDGE)
    assert (response.label, response.source) == (
        common_pb2.LABEL_RELEVANT,
        gateway_pb2.LABEL_SOURCE_JUDGES,
    )
    # The decision point is the artifact's threshold the judge reports, not 0.5.
    gw.script.relevance_threshold = 0.65
    response = _label(gw, mode=gateway_pb2.LABEL_MODE_JUDGE)
    assert (response.label, response.source) == (
        common_pb2.LABEL_IRRELEVANT,
        gateway_pb2.LABEL_SOURCE_JUDGES,
    )
    assert gw.db.decision(response.audit_id).versions["ensemble"]["artifact"] == "rel-test-1"
    with pytest.raises(grpc.RpcError) as empty:
        _label(gw, chunk="")
    assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "chunk is empty" in empty.value.details()


def test_label_cascade_band_is_the_artifacts_unless_the_settings_override_it(
    database_url: str,
) -> None:
    timeouts = dict.fromkeys(("confidence", "ensemble", "entailment", "retrieval", "debate"), 5.0)
    gateway = _gateway(database_url, stage_timeout_s=timeouts)
    gw = next(gateway)
    try:
        gw.script.p_match = 0.5
        gw.script.relevance_band = (0.5, 0.9)  # p <= band_low: the judges say irrelevant
        response = _label(gw)
        assert (response.label, response.source) == (
            common_pb2.LABEL_IRRELEVANT,
            gateway_pb2.LABEL_SOURCE_JUDGES,
        )
        assert gw.db.decision(response.audit_id).signals["judges"]["band"] == [0.5, 0.9]
        assert "debate" not in gw.script.calls
    finally:
        gateway.close()
    # gateway.label_irrelevant_at / label_relevant_at replace the band's ends.
    gateway = _gateway(
        database_url, stage_timeout_s=timeouts, label_irrelevant_at=0.1, label_relevant_at=0.95
    )
    gw = next(gateway)
    try:
        gw.script.p_match = 0.5
        gw.script.relevance_band = (0.5, 0.9)
        response = _label(gw)
        assert response.source == gateway_pb2.LABEL_SOURCE_DEBATE
        assert gw.script.calls["debate"] == 1
    finally:
        gateway.close()


def test_batch_label_streams_every_item_and_validates_first(gw: Gateway) -> None:
    items = [
        gateway_pb2.LabelRequest(query=f"q{i}", chunk=f"passage {i}", item_id=f"i{i}")
        for i in range(3)
    ]
    results = list(gw.stub.BatchLabel(gateway_pb2.BatchLabelRequest(items=items), timeout=20))
    assert sorted(r.index for r in results) == [0, 1, 2]
    assert {r.result.item_id for r in results} == {"i0", "i1", "i2"}
    items[1].chunk = " "
    with pytest.raises(grpc.RpcError) as bad:
        list(gw.stub.BatchLabel(gateway_pb2.BatchLabelRequest(items=items), timeout=20))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "items[1]" in bad.value.details()


def test_audit_command_reads_the_trail(gw: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from tribunal.cli import main

    accepted = _ask(gw)
    gw.script.p_match = 0.1
    _ask(gw)
    url = gw.db.url
    assert main(["audit", "--database-url", url, "list", "--kind", "answer"]) == 0
    listing = capsys.readouterr().out
    assert "ACCEPT" in listing
    assert "LOW_CONFIDENCE" in listing
    assert accepted.audit_id in listing
    assert main(["audit", "--database-url", url, "stats", "--since", "1h"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["answer"]["counts"] == {"ACCEPT": 1, "FALLBACK/LOW_CONFIDENCE": 1}
    assert main(["audit", "--database-url", url, "show", accepted.audit_id]) == 0
    assert json.loads(capsys.readouterr().out)["kb_entry_id"] == "faq-1"
    assert main(["audit", "--database-url", url, "list", "--since", "yesterday"]) == 2
    assert "use a duration like 30m" in capsys.readouterr().err


def test_only_entries_with_a_current_verification_are_served(gw: Gateway) -> None:
    """Unverified, failed, evidence-less, or verified by another checker version: never
    a candidate. (A long answer is verified claim by claim when written, not skipped.)"""
    verdicts = {
        "unverified": retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED,
        "failed": retrieval_pb2.VERIFICATION_VERDICT_FAILED,
        "no_evidence": retrieval_pb2.VERIFICATION_VERDICT_NO_EVIDENCE,
    }
    for name, verdict in verdicts.items():
        gw.script.verdicts = {"faq-1": verdict, "faq-2": verdict}
        response = _ask(gw)
        assert response.decision == common_pb2.DECISION_FALLBACK, name
        assert response.fallback_reason == gateway_pb2.FALLBACK_REASON_UNVERIFIED, name
        record = gw.db.decision(response.audit_id)
        assert record.reason == "UNVERIFIED"
        assert set(record.detail["not_served"]) == {"faq-1", "faq-2"}
        assert "ensemble" not in gw.script.calls  # nothing servable: nothing is judged
    # Served only while verified by the checker version the gateway is configured with.
    gw.script.verdicts = {}
    gw.script.hits = [
        common_pb2.KbEntry(
            id="faq-long",
            question="Everything about masks?",
            answer="Masks help. " * 300,  # longer than one entailment hypothesis
            chunks=[common_pb2.Chunk(id="m1", text="Masks help.")],
        )
    ]
    response = _ask(gw)
    assert (response.decision, response.kb_entry_id) == (common_pb2.DECISION_ACCEPT, "faq-long")
    stale = gw.script.hits[0]
    gw.script.hits = [stale]
    original = _scripted_stages.CHECKER_VERSION
    _scripted_stages.CHECKER_VERSION = "entail-000000000000"
    try:
        response = _ask(gw)
    finally:
        _scripted_stages.CHECKER_VERSION = original
    assert response.fallback_reason == gateway_pb2.FALLBACK_REASON_UNVERIFIED
    assert (
        "not the configured" in gw.db.decision(response.audit_id).detail["not_served"]["faq-long"]
    )
