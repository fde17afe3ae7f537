"""The ensemble service on a real model through a real gRPC server.

The 135M model is the only judge model (plain and augmented prompt: two judges), on
llama.cpp or transformers; the aggregator artifact is trained here on synthetic votes and the real
embedder's dimension, so the test checks the serving path, not the model's skill.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import numpy as np
import pytest
from tribunal.core import Settings, load_settings
from tribunal.ensemble import EnsembleArtifact
from tribunal.ensemble._base import EnsembleInputs
from tribunal.ensemble._latent import LatentEnsemble
from tribunal.ensemble._majority import MajorityVote
from tribunal.ensemble._weighted import WeightedVote
from tribunal.ensemble.servicer import build_host
from tribunal.v1 import common_pb2, ensemble_pb2, ensemble_pb2_grpc

from ._llm_backend import LLM_BACKEND

JUDGES = ("llm_tiny/ral2m", "llm_tiny/ral2m-augmented")
ENTRY = common_pb2.KbEntry(
    id="faq-1",
    question="How does the virus spread?",
    answer="The virus spreads mainly between people who are in close contact with one another.",
    chunks=[
        common_pb2.Chunk(id="c0", text="Wash your hands often with soap and water."),
        common_pb2.Chunk(
            id="c1", text="The virus spreads through respiratory droplets when people cough."
        ),
    ],
)


def _artifact(folder: Path) -> EnsembleArtifact:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 2, 200)
    votes = np.stack([labels, rng.integers(0, 2, 200)], axis=1).astype(np.float32)
    inputs = EnsembleInputs(votes, votes, rng.normal(0, 1, (200, 384)).astype(np.float32))
    latent = LatentEnsemble(hidden=32, max_epochs=10, train_samples=16, eval_samples=64)
    artifact = EnsembleArtifact(
        judges=JUDGES,
        vote_thresholds=np.array([0.5, 0.5]),
        aggregators={
            "majority": MajorityVote().fit(inputs, labels),
            "weighted": WeightedVote().fit(inputs, labels),
            "latent": latent.fit(inputs, labels),
        },
        default_aggregator="latent",
        embedder="all-minilm-l6-v2",
        dimension=384,
    )
    artifact.save(folder)
    return artifact


@pytest.fixture(scope="module")
def artifact(tmp_path_factory: pytest.TempPathFactory) -> EnsembleArtifact:
    folder = tmp_path_factory.mktemp("ensemble") / "artifact"
    _artifact(folder)
    return EnsembleArtifact.load(folder)


def _settings(**ensemble: object) -> Settings:
    return load_settings(
        "tiny",
        llm_backend=LLM_BACKEND,
        server={"port": 0, "metrics_port": None},
        ensemble={"matcher": "judges", **ensemble},
    )


@pytest.fixture(scope="module")
def settings(artifact: EnsembleArtifact, tmp_path_factory: pytest.TempPathFactory) -> Settings:
    folder = tmp_path_factory.mktemp("served") / "artifact"
    artifact.save(folder)
    return _settings(artifact_path=str(folder), judges=list(JUDGES), aggregator="latent")


@pytest.fixture(scope="module")
def stub(settings: Settings) -> Iterator[ensemble_pb2_grpc.EnsembleServiceStub]:
    host = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(600), host.load_error
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield ensemble_pb2_grpc.EnsembleServiceStub(channel)
    host.stop(0)


@pytest.mark.models
def test_match_over_grpc_reports_every_judge_and_the_artifact(
    stub: ensemble_pb2_grpc.EnsembleServiceStub, settings: Settings, artifact: EnsembleArtifact
) -> None:
    from tribunal.core.llm import shared_engine
    from tribunal.prompts import get_prompt

    response = stub.Match(
        ensemble_pb2.MatchRequest(query="How is the virus transmitted?", candidate=ENTRY)
    )
    assert 0.0 <= response.p_match <= 1.0
    assert response.aggregator == "latent"
    assert response.artifact_version == artifact.version
    assert [j.judge for j in response.judges] == list(JUDGES)
    assert [j.prompt for j in response.judges] == [
        "matching/ral2m@1",
        "matching/ral2m-augmented@1",
    ]
    assert all(j.model == "smollm2-135m-instruct-q4_1" for j in response.judges)
    assert all(j.vote == (j.p_yes >= 0.5) for j in response.judges)
    assert response.usage.prompt_tokens > 0
    # The plain judge's P(yes) is the engine's, read directly.
    engine = shared_engine(settings, "llm_tiny")
    plain = get_prompt("matching/ral2m@1").render(
        engine, query="How is the virus transmitted?", question=ENTRY.question, answer=ENTRY.answer
    )
    # llama.cpp picks other matmul kernels when a reused prefix shortens the tokens it
    # evaluates: the same prompt moves by up to ~0.03 (see test_llm_engine.py).
    assert response.judges[0].p_yes == pytest.approx(engine.p_yes([plain])[0], abs=0.04)


@pytest.mark.models
def test_batch_match_keeps_order_and_chunkless_candidates_reuse_the_plain_verdict(
    stub: ensemble_pb2_grpc.EnsembleServiceStub,
) -> None:
    bare = common_pb2.KbEntry(id="bare", question=ENTRY.question, answer=ENTRY.answer)
    other = common_pb2.KbEntry(
        id="other", question="Can pets carry the virus?", answer="There is no evidence they do."
    )
    items = [
        ensemble_pb2.MatchRequest(query="How is the virus transmitted?", candidate=bare),
        ensemble_pb2.MatchRequest(query="How is the virus transmitted?", candidate=other),
    ]
    response = stub.BatchMatch(ensemble_pb2.BatchMatchRequest(items=items))
    assert len(response.results) == 2
    for result in response.results:
        plain, augmented = result.judges
        assert augmented.prompt == "matching/ral2m@1"
        assert augmented.p_yes == plain.p_yes
    single = stub.Match(items[1])
    # Alone or in a batch (another prefix reused): equal up to llama.cpp's kernel choice.
    assert single.judges[0].p_yes == pytest.approx(response.results[1].judges[0].p_yes, abs=0.04)


@pytest.mark.models
def test_bad_requests_are_invalid_argument(stub: ensemble_pb2_grpc.EnsembleServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stub.Match(ensemble_pb2.MatchRequest(query=" ", candidate=ENTRY))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "query" in (caught.value.details() or "")
    with pytest.raises(grpc.RpcError) as caught:
        stub.Match(ensemble_pb2.MatchRequest(query="q", candidate=common_pb2.KbEntry(question="x")))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.models
def test_majority_runs_without_an_artifact(tmp_path: Path) -> None:
    from tribunal.ensemble import EnsembleMatcher, MatchRequestItem
    from tribunal.kb import entry_from_proto

    settings = _settings(
        aggregator="majority",
        judges=["llm_tiny/ral2m"],
        artifact_path=None,
    )
    matcher = EnsembleMatcher.from_settings(settings)
    try:
        [result] = matcher.match(
            [MatchRequestItem("How is the virus transmitted?", entry_from_proto(ENTRY))]
        )
    finally:
        matcher.close()
    assert result.aggregator == "majority"
    assert result.artifact_version == ""
    assert result.p_match == float(result.judges[0].vote)
