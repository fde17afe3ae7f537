"""The gateway and a calibrator bound to a KB: refused on another KB, matcher or retrieval
model, each passed on to the confidence stage; and a threshold certified for no α is a
NO_CERTIFIED_THRESHOLD fallback with the signals audited.

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
    fit_artifact,
)
from tribunal.confidence._threshold import RiskThreshold
from tribunal.core import load_settings
from tribunal.core.storage import Database
from tribunal.gateway.servicer import build_host
from tribunal.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

from tests.integration import _scripted_stages
from tests.integration._scripted_stages import RETRIEVAL_MODEL, Script
from tests.unit._confidence_data import synthetic_data


def _artifact(
    tmp_path: Path,
    *,
    bound: bool,
    certified: bool,
    matcher: str = "latent:test-1",
    embedder: str = RETRIEVAL_MODEL,
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
        embedder=embedder,  # the scripted retrieval reports the tiny profile's embedder
        profile="tiny",
        candidates=2,
    )
    artifact: CalibratorArtifact = replace(
        fitted, thresholds=(threshold,), binding=binding if bound else None
    )
    return artifact.save(tmp_path / "calibrator.json")


def _answer(
    database_url: str,
    artifact: Path,
    monkeypatch: pytest.MonkeyPatch,
    content: str = "",
    script: Script | None = None,
) -> tuple[gateway_pb2.AnswerResponse, Database]:
    """One Answer through a gateway trusting ``artifact``; retrieval reports ``content``
    as the KB's content version (and ``script``'s retrieval model)."""
    script = script or Script()
    script.kb_content_version = content
    stages = _scripted_stages.start(script)
    address = f"127.0.0.1:{stages.port}"
    settings = load_settings(
        "tiny",
        server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
        database_url=database_url,
        confidence={"artifact_path": str(artifact), "alpha": 0.1},
        gateway={
            "kb_trusted_keys": script.trusted_keys,
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


@pytest.mark.parametrize("reported", ["tuned:tm-0123456789ab", ""])
def test_a_calibrator_certified_with_another_retrieval_model_is_refused(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, reported: str
) -> None:
    # The same KB, re-embedded with its tuned matcher's model (or a retrieval that reports
    # no model: the certification cannot be checked): nothing is accepted.
    artifact = _artifact(tmp_path, bound=True, certified=True)
    script = Script(retrieval_model=reported)
    reply, db = _answer(sqlite_url, artifact, monkeypatch, "kb-0123456789abcdef", script)
    assert reply.decision == common_pb2.DECISION_FALLBACK
    assert reply.fallback_reason == gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
    record = db.decision(reply.audit_id)
    assert record.reason == "NO_CERTIFIED_THRESHOLD"
    assert f"certified for retrieval model {RETRIEVAL_MODEL}" in record.error
    assert (reported or "did not report") in record.error
    assert "tribunal calibrate --collection faq" in record.error
    assert not script.score_requests, "nothing certified: the confidence stage is not asked"


@pytest.mark.parametrize("model", [RETRIEVAL_MODEL, "tuned:tm-0123456789ab"])
def test_the_calibrated_kb_gets_past_the_check(
    tmp_path: Path, sqlite_url: str, monkeypatch: pytest.MonkeyPatch, model: str
) -> None:
    # The same KB searched with the calibrated model (the profile's embedder, or a tuned
    # one, which the gateway's profile cannot vouch for at load: checked per request): the
    # gateway scores, so the reply is the confidence stage's (the scripted one scores with
    # another calibrator, which the gateway reports as malformed).
    artifact = _artifact(tmp_path, bound=True, certified=True, embedder=model)
    script = Script(retrieval_model=model)
    reply, db = _answer(sqlite_url, artifact, monkeypatch, "kb-0123456789abcdef", script)
    assert reply.fallback_reason != gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
    assert reply.failed_stage == "confidence"
    # The versions the gateway checked are passed on for the confidence stage to check.
    assert script.score_requests
    for item in script.score_requests:
        assert item.kb_content_version == "kb-0123456789abcdef"
        assert item.matcher_version == "latent:test-1"
        assert item.retrieval_model == model
    assert db.decision(reply.audit_id).versions["kb"]["retrieval_model"] == model


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
