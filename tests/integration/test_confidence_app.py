"""The confidence Serve deployment's class, driven directly (tests/integration/test_serve_stack.py
runs it under Ray behind the gRPC proxy): proto in, proto out, the servicer's answers."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import grpc
import pytest
from tribunal.confidence import FitConfig, fit_artifact
from tribunal.confidence.app import ConfidenceDeployment, build_app
from tribunal.core import InvalidArgumentError, ResourceExhaustedError, load_settings
from tribunal.v1 import common_pb2, confidence_pb2

from tests.unit._confidence_data import synthetic_data


class _Context:
    """What Serve's proxy hands a method: a context the method sets the status on."""

    def __init__(self) -> None:
        self.code: grpc.StatusCode | None = None
        self.details = ""

    def set_code(self, code: grpc.StatusCode) -> None:
        self.code = code

    def set_details(self, details: str) -> None:
        self.details = details


@pytest.fixture
def deployment(tmp_path: Path) -> Any:
    artifact = fit_artifact(synthetic_data(600), FitConfig(alphas=(0.05, 0.1)))
    path = artifact.save(tmp_path / "c.json")
    settings = load_settings(
        "tiny",
        confidence={"artifact_path": str(path), "alpha": 0.05, "max_items_per_request": 4},
    )
    return ConfidenceDeployment.func_or_class(settings.model_dump(mode="json"))


def test_build_app_binds_the_deployment_with_its_settings() -> None:
    settings = load_settings("tiny", confidence={"deployment": {"num_cpus": 0.5}})
    app = build_app(settings)
    assert type(app).__name__ == "Application"
    assert ConfidenceDeployment.name == "confidence"
    assert settings.confidence.deployment.ray_options()["ray_actor_options"]["num_cpus"] == 0.5


def test_score_and_batch_score_take_and_return_protos(deployment: Any) -> None:
    high = confidence_pb2.Signals(ensemble_p_match=0.97, judge_p_yes={"a": 0.95})
    reply = asyncio.run(deployment.Score(confidence_pb2.ScoreRequest(signals=high)))
    assert isinstance(reply, confidence_pb2.ScoreResponse)
    assert reply.calibrator_version == deployment.calibrator_version
    assert reply.alpha == pytest.approx(0.05)
    assert 0.0 <= reply.confidence <= 1.0
    assert reply.decision in (common_pb2.DECISION_ACCEPT, common_pb2.DECISION_FALLBACK)
    batch = asyncio.run(
        deployment.BatchScore(
            confidence_pb2.BatchScoreRequest(
                items=[
                    confidence_pb2.ScoreRequest(signals=high),
                    confidence_pb2.ScoreRequest(
                        signals=confidence_pb2.Signals(ensemble_p_match=0.02), alpha=0.1
                    ),
                ]
            )
        )
    )
    assert [r.alpha for r in batch.results] == pytest.approx([0.05, 0.1])
    assert batch.results[0].confidence == pytest.approx(reply.confidence)
    assert batch.results[0].confidence > batch.results[1].confidence
    assert batch.results[1].decision == common_pb2.DECISION_FALLBACK


def test_errors_set_the_status_for_the_proxy_and_reach_handle_callers(deployment: Any) -> None:
    bad = confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(ensemble_p_match=2.0))
    context = _Context()
    with pytest.raises(InvalidArgumentError):
        asyncio.run(deployment.Score(bad, grpc_context=context))
    assert context.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "ensemble_p_match" in context.details
    # A handle call has no context: the typed error itself travels back.
    too_many = confidence_pb2.BatchScoreRequest(items=[confidence_pb2.ScoreRequest()] * 5)
    with pytest.raises(ResourceExhaustedError):
        asyncio.run(deployment.BatchScore(too_many))
