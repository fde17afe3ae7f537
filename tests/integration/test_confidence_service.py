"""The confidence service through a real gRPC server (ServiceHost on port 0)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status
from tribunal.confidence import CalibratorArtifact, ConfidenceScorer, FitConfig, fit_artifact
from tribunal.confidence.servicer import build_host, signals_from_proto
from tribunal.core import NotFoundError, load_settings
from tribunal.core.server import ServiceHost
from tribunal.v1 import common_pb2, confidence_pb2, confidence_pb2_grpc

from tests.unit._confidence_data import synthetic_data

Start = Callable[..., tuple[ServiceHost, confidence_pb2_grpc.ConfidenceServiceStub, grpc.Channel]]


@pytest.fixture(scope="module")
def artifact() -> CalibratorArtifact:
    # 2,000 items: the risk control certifies α = 0.05 on the part it did not fit on.
    return fit_artifact(synthetic_data(2000), FitConfig(calibrator="platt", alphas=(0.05, 0.1)))


@pytest.fixture
def start(artifact: CalibratorArtifact, tmp_path: Path) -> Iterator[Start]:
    hosts: list[ServiceHost] = []
    channels: list[grpc.Channel] = []

    def run(
        save: bool = True, **confidence: object
    ) -> tuple[ServiceHost, confidence_pb2_grpc.ConfidenceServiceStub, grpc.Channel]:
        path = tmp_path / "calibrator.json"
        if save:
            artifact.save(path)
        settings = load_settings(
            server={"port": 0, "metrics_port": None},
            confidence={"artifact_path": path, "alpha": 0.05, **confidence},
        )
        host = build_host(settings)
        port = host.start()
        hosts.append(host)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        channels.append(channel)
        return host, confidence_pb2_grpc.ConfidenceServiceStub(channel), channel

    yield run
    for channel in channels:
        channel.close()
    for host in hosts:
        host.stop(0)


def _signals(**values: object) -> confidence_pb2.Signals:
    return confidence_pb2.Signals(**values)  # type: ignore[arg-type]


def _invalid(call: Callable[[], object]) -> tuple[str, str]:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    status = rpc_status.from_call(caught.value)
    assert status is not None
    detail = error_details_pb2.BadRequest()
    status.details[0].Unpack(detail)
    return caught.value.details(), detail.field_violations[0].field


def test_score_and_batch_score_match_the_domain_scorer(
    start: Start, artifact: CalibratorArtifact
) -> None:
    host, stub, channel = start()
    assert host.wait_until_ready(30)
    health = health_pb2_grpc.HealthStub(channel).Check(
        health_pb2.HealthCheckRequest(service="tribunal.v1.ConfidenceService"), timeout=5
    )
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    strong = _signals(
        ensemble_p_match=0.97,
        dense_score=0.95,
        judge_p_yes={"a": 0.96, "b": 0.9},
        entailment_p_entail=0.95,
        debate=confidence_pb2.DEBATE_SIGNAL_AGREED_RELEVANT,
    )
    weak = _signals(ensemble_p_match=0.1, judge_p_yes={"a": 0.05})
    response = stub.Score(confidence_pb2.ScoreRequest(signals=strong), timeout=10)
    expected = ConfidenceScorer(artifact, alpha=0.05).score(signals_from_proto(strong))
    assert response.confidence == pytest.approx(expected.confidence, abs=1e-15)
    assert response.decision == common_pb2.DECISION_ACCEPT
    assert response.threshold == artifact.threshold_for(0.05).threshold
    assert response.calibrator_version == artifact.version
    assert response.alpha == 0.05
    batch = stub.BatchScore(
        confidence_pb2.BatchScoreRequest(
            items=[
                confidence_pb2.ScoreRequest(signals=weak),
                confidence_pb2.ScoreRequest(signals=strong, alpha=0.1),
            ]
        ),
        timeout=10,
    )
    assert [r.decision for r in batch.results] == [
        common_pb2.DECISION_FALLBACK,
        common_pb2.DECISION_ACCEPT,
    ]
    assert batch.results[1].alpha == 0.1
    assert batch.results[1].threshold == artifact.threshold_for(0.1).threshold
    assert stub.BatchScore(confidence_pb2.BatchScoreRequest(), timeout=10).results == []


def test_bad_inputs_are_invalid_argument_naming_the_field(start: Start) -> None:
    host, stub, _ = start()
    assert host.wait_until_ready(30)

    def score(signals: confidence_pb2.Signals, **request: float) -> Callable[[], object]:
        return lambda: stub.Score(
            confidence_pb2.ScoreRequest(signals=signals, **request), timeout=10
        )

    assert _invalid(score(_signals(ensemble_p_match=1.5))) == (
        "signals.ensemble_p_match must be a probability in [0, 1], got 1.5",
        "signals.ensemble_p_match",
    )
    assert _invalid(score(_signals(judge_p_yes={"a": math.nan})))[1] == "signals.judge_p_yes[a]"
    assert _invalid(score(_signals(dense_score=math.inf)))[1] == "signals.dense_score"
    message, field = _invalid(score(_signals(judge_p_yes={"gpt": 0.9})))
    assert field == "signals.judge_p_yes[gpt]"
    assert "not known to this calibrator" in message
    assert _invalid(score(_signals(extra={"unknown": 1.0})))[1] == "signals.extra[unknown]"
    assert _invalid(score(_signals(ensemble_p_match=0.5), alpha=0.2))[1] == "alpha"
    batch = confidence_pb2.BatchScoreRequest(
        items=[
            confidence_pb2.ScoreRequest(signals=_signals(ensemble_p_match=0.5)),
            confidence_pb2.ScoreRequest(signals=_signals(ensemble_p_match=-0.5)),
        ]
    )
    assert (
        _invalid(lambda: stub.BatchScore(batch, timeout=10))[1]
        == "items[1].signals.ensemble_p_match"
    )


def test_an_oversized_batch_is_resource_exhausted(start: Start) -> None:
    host, stub, _ = start(max_items_per_request=2)
    assert host.wait_until_ready(30)
    request = confidence_pb2.BatchScoreRequest(
        items=[confidence_pb2.ScoreRequest(signals=_signals(ensemble_p_match=0.5))] * 3
    )
    with pytest.raises(grpc.RpcError) as caught:
        stub.BatchScore(request, timeout=10)
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "the limit is 2 (confidence.max_items_per_request)" in caught.value.details()


def test_a_missing_artifact_keeps_the_service_not_serving(start: Start) -> None:
    host, stub, channel = start(save=False)
    assert not host.wait_until_ready(30)
    assert isinstance(host.load_error, NotFoundError)
    health = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=5)
    assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING
    with pytest.raises(grpc.RpcError) as caught:
        stub.Score(confidence_pb2.ScoreRequest(signals=_signals(ensemble_p_match=0.5)), timeout=10)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
