"""The gateway and a calibrator bound to a KB: refused on another KB, and a threshold
certified for no α is a NO_CERTIFIED_THRESHOLD fallback with the signals audited.

Scripted stages (tests/integration/_scripted_stages.py) stand in for the models; the
gateway, its checks and the audit store are real.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from tribunal.confidence import (
    CalibrationBinding,
    CalibratorArtifact,
    FitConfig,
    Signals,
    embedder_version,
    fit_artifact,
)
from tribunal.confidence._threshold import RiskThreshold
from tribunal.core import load_settings
from tribunal.core.storage import Database
from tribunal.gateway.servicer import build_host
from tribunal.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

from tests.integration import _scripted_stages
from tests.integration._scripted_stages import Script
from tests.unit._confidence_data import synthetic_data


def _artifact(
    tmp_path: Path, *, bound: bool, certified: bool, matcher: str = "latent:test-1"
) -> Path:
    # Fitted on the signals the scripted stages send (P(match), the "strong" judge, ranks).
    data = synthetic_data(300)
    signals = tuple(
        Signals(
            ensemble_p_match=s.ensemble_p_match,
            judge_p_yes={"strong": s.judge_p_yes["a"]},
            retrieval_rank=s.retrieval_rank,
            dense_score=s.dense_score,
        )
        for s in data.signals
    )
    fitted = fit_artifact(
        replace(data, signals=signals), FitConfig(calibrator="platt", alphas=(0.1,))
    )
    threshold = (
        RiskThreshold(0.1, 0.1, 0.5, 60, 2, 0.08, 100, "ltt")
        if certified
        else RiskThreshold(0.1, 0.1, None, 0, 0, None, 100, "ltt")
    )
    binding = CalibrationBinding(
        collection="faq",
        collection_version="kb-0123456789abcdef",
        entries=2,
        matcher=matcher,  # the scripted ensemble reports latent:test-1
        embedder=embedder_version(load_settings("tiny")),
        profile="tiny",
        candidates=2,
    )
    artifact: CalibratorArtifact = replace(
        fitted, thresholds=(threshold,), binding=binding if bound else None
    )
    return artifact.save(tmp_path / "calibrator.json")


def _answer(
    database_url: str, artifact: Path, monkeypatch: pytest.MonkeyPatch, content: str = ""
) -> tuple[gateway_pb2.AnswerResponse, Database]:
    """One Answer through a gateway trusting ``artifact``; retrieval reports ``content``
    as the KB's content version."""
    search = _scripted_stages._Retrieval.Search

    def reporting(self, request, context):  # type: ignore[no-untyped-def]
        response = search(self, request, context)
        response.kb_content_version = content
        return response

    monkeypatch.setattr(_scripted_stages._Retrieval, "Search", reporting)
    script = Script()
    stages = _scripted_stages.start(script)
    address = f"127.0.0.1:{stages.port}"
    settings = load_settings(
        "tiny",
        server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
        database_url=database_url,
        confidence={"artifact_path": str(artifact), "alpha": 0.1},
        gateway={
            "discovery": "grpc",
            "addresses": dict.fromkeys(
                ("retrieval", "ensemble", "entailment", "confidence", "debate"), address
            ),
        },
    )
    host = build_host(settings)
    port = host.start()
    try:
        assert host.wait_until_ready(20), host.load_error
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = gateway_pb2_grpc.GatewayServiceStub(channel)  # type: ignore[no-untyped-call]
            reply = stub.Answer(gateway_pb2.AnswerRequest(query="how long is the incubation?"))
    finally:
        host.stop(0)
        stages.stop(0)
    return reply, Database(database_url)


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'audit.db'}"


@pytest.mark.parametrize("content", ["kb-ffffffffffffffff", ""])
def test_a_calibrator_bound_to_another_kb_is_refused(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, content: str
) -> None:
    # Another KB content version, or none reported (the certification cannot be checked):
    # nothing is accepted, and the audit row says which command fixes it.
    artifact = _artifact(tmp_path, bound=True, certified=True)
    reply, db = _answer(sqlite_url, artifact, monkeypatch, content)
    assert reply.decision == common_pb2.DECISION_FALLBACK
    assert reply.fallback_reason == gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
    record = db.decision(reply.audit_id)
    assert record.reason == "NO_CERTIFIED_THRESHOLD"
    assert "tribunal calibrate --collection faq" in record.error
    assert record.signals, "the signals are audited even when nothing is certified"


def test_a_calibrator_certified_with_another_matcher_is_refused(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Certified with a tuned matcher; the ensemble now matches with another one (the tune
    # was replaced, or rolled back): the same KB, but nothing is accepted.
    artifact = _artifact(tmp_path, bound=True, certified=True, matcher="features:tm-0123456789ab")
    reply, db = _answer(sqlite_url, artifact, monkeypatch, "kb-0123456789abcdef")
    assert reply.decision == common_pb2.DECISION_FALLBACK
    assert reply.fallback_reason == gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
    record = db.decision(reply.audit_id)
    assert record.reason == "NO_CERTIFIED_THRESHOLD"
    assert "certified for matcher features:tm-0123456789ab" in record.error
    assert "matched by latent:test-1" in record.error


def test_the_calibrated_kb_gets_past_the_check(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same KB: the gateway scores, so the reply is the confidence stage's (the scripted
    # one scores with another calibrator, which the gateway reports as malformed).
    artifact = _artifact(tmp_path, bound=True, certified=True)
    reply, _ = _answer(sqlite_url, artifact, monkeypatch, "kb-0123456789abcdef")
    assert reply.fallback_reason != gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
    assert reply.failed_stage == "confidence"


def test_no_threshold_certified_for_alpha_is_a_reason_not_a_fault(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    artifact = _artifact(tmp_path, bound=False, certified=False)
    reply, db = _answer(sqlite_url, artifact, monkeypatch)
    assert reply.decision == common_pb2.DECISION_FALLBACK
    assert reply.fallback_reason == gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
    assert not reply.failed_stage
    record = db.decision(reply.audit_id)
    assert record.reason == "NO_CERTIFIED_THRESHOLD"
    scored = next(iter(record.signals.values()))
    assert "confidence" in scored
    assert scored["signals"]["ensemble_p_match"] == pytest.approx(0.9)
