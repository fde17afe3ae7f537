"""In-process stages called directly (``LocalTransport``): the real confidence servicer,
its replies and errors as behind a gRPC server, timeouts, no KB writes, closing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from tribunal.confidence import CalibratorArtifact, ConfidenceScorer, FitConfig, fit_artifact
from tribunal.confidence.servicer import signals_from_proto
from tribunal.core import (
    DeadlineExceededError,
    InternalError,
    InvalidArgumentError,
    PermissionDeniedError,
    UnavailableError,
    load_settings,
)
from tribunal.gateway._local_transport import LocalTransport
from tribunal.v1 import common_pb2, confidence_pb2, retrieval_pb2

from tests.unit._confidence_data import synthetic_data

STRONG = confidence_pb2.Signals(ensemble_p_match=0.97, judge_p_yes={"a": 0.95})


@pytest.fixture
def transport(tmp_path: Path) -> Iterator[tuple[LocalTransport, CalibratorArtifact]]:
    # 2,000 items: the risk control certifies α = 0.05 on the part it did not fit on.
    artifact = fit_artifact(synthetic_data(2000), FitConfig(calibrator="platt", alphas=(0.05,)))
    artifact.save(tmp_path / "calibrator.json")
    settings = load_settings(
        confidence={"artifact_path": tmp_path / "calibrator.json", "alpha": 0.05}
    )
    local = LocalTransport(settings, ["confidence"], max_workers=2)
    yield local, artifact
    local.close()


def test_a_stage_answers_as_behind_a_server(
    transport: tuple[LocalTransport, CalibratorArtifact],
) -> None:
    local, artifact = transport
    request = confidence_pb2.BatchScoreRequest(
        request_id="r1", items=[confidence_pb2.ScoreRequest(signals=STRONG)]
    )
    reply = local.call("confidence", "BatchScore", request, timeout_s=30)
    expected = ConfidenceScorer(artifact, alpha=0.05).score(signals_from_proto(STRONG))
    assert reply.request_id == "r1"
    assert reply.results[0].confidence == pytest.approx(expected.confidence, abs=1e-15)
    assert reply.results[0].decision == common_pb2.DECISION_ACCEPT
    assert reply.results[0].calibrator_version == artifact.version


def test_a_stage_error_is_the_tribunal_error_a_server_would_send(
    transport: tuple[LocalTransport, CalibratorArtifact],
) -> None:
    local, _ = transport
    bad = confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(ensemble_p_match=1.5))
    with pytest.raises(InvalidArgumentError, match="must be a probability") as error:
        local.call("confidence", "Score", bad, timeout_s=30)
    assert error.value.field == "signals.ensemble_p_match"
    with pytest.raises(InternalError, match="no in-process stage 'debate'"):
        local.call("debate", "Assess", confidence_pb2.ScoreRequest(), timeout_s=30)


def test_a_call_past_its_timeout_is_left_behind(
    transport: tuple[LocalTransport, CalibratorArtifact],
) -> None:
    local, _ = transport
    many = confidence_pb2.BatchScoreRequest(
        items=[confidence_pb2.ScoreRequest(signals=STRONG)] * 100
    )
    with pytest.raises(DeadlineExceededError, match=r"took over|deadline passed"):
        local.call("confidence", "BatchScore", many, timeout_s=1e-9)
    # The pool still answers the next call.
    assert local.call("confidence", "BatchScore", many, timeout_s=30).results


def test_no_kb_writes_and_no_calls_after_close(
    transport: tuple[LocalTransport, CalibratorArtifact],
) -> None:
    local, _ = transport
    entry = retrieval_pb2.UpsertRequest(collection="covid")
    with pytest.raises(PermissionDeniedError, match="changes the KB"):
        local.call("retrieval", "Upsert", entry, timeout_s=30)
    with pytest.raises(PermissionDeniedError):
        local.call("retrieval", "Delete", retrieval_pb2.DeleteRequest(), timeout_s=30)
    local.close()
    with pytest.raises(UnavailableError, match="closed"):
        local.call("confidence", "BatchScore", confidence_pb2.BatchScoreRequest(), timeout_s=30)
