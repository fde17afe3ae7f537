"""The feature matcher (``ensemble.matcher: features``) through a real gRPC server, with
the tiny profile's shipped artifact on the real MPNet embedder: no LLM is loaded."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from tribunal.core import Settings, load_settings
from tribunal.ensemble import MatchFeaturesArtifact, features_path, match_feature_values
from tribunal.ensemble.servicer import build_host
from tribunal.v1 import common_pb2, ensemble_pb2, ensemble_pb2_grpc

NOVEL = common_pb2.KbEntry(
    id="faq-novel",
    question="What is a novel coronavirus?",
    answer="A novel coronavirus is a new coronavirus that has not been previously identified.",
)
PETS = common_pb2.KbEntry(
    id="faq-pets",
    question="Can I get COVID-19 from my pets?",
    answer="There is no evidence that companion animals, including pets, spread the virus.",
)


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return load_settings(
        "tiny",
        data_dir=str(tmp_path_factory.mktemp("data")),
        server={"port": 0, "metrics_port": None},
        ensemble={"matcher": "features"},
    )


@pytest.fixture(scope="module")
def stub(settings: Settings) -> Iterator[ensemble_pb2_grpc.EnsembleServiceStub]:
    host = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(600), host.load_error
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield ensemble_pb2_grpc.EnsembleServiceStub(channel)
    host.stop(0)


@pytest.mark.models
def test_batch_match_scores_the_paraphrase_above_the_unrelated_entry(
    stub: ensemble_pb2_grpc.EnsembleServiceStub, settings: Settings
) -> None:
    from tribunal.embedding import load_profile_embedder

    artifact = MatchFeaturesArtifact.load(features_path(settings))
    query = "What is a new coronavirus?"
    response = stub.BatchMatch(
        ensemble_pb2.BatchMatchRequest(
            items=[
                ensemble_pb2.MatchRequest(query=query, candidate=NOVEL),
                ensemble_pb2.MatchRequest(query=query, candidate=PETS),
            ]
        )
    )
    novel, pets = response.results
    assert novel.p_match > artifact.threshold > pets.p_match
    assert (novel.match, pets.match) == (True, False)
    for result in response.results:
        assert result.aggregator == "features"
        assert result.artifact_version == artifact.version
        assert list(result.judges) == []  # no LLM judged: nothing to report per judge
        assert result.usage.prompt_tokens == 0
    # What the service answers is the artifact's regression on the shared feature code.
    embedder = load_profile_embedder(settings, artifact.embedder.model_key)
    values = match_feature_values(
        [query, query], [NOVEL.question, PETS.question], [NOVEL.answer, PETS.answer], embedder
    )
    expected = artifact.p_match(values)
    assert [novel.p_match, pets.p_match] == pytest.approx(expected.tolist(), abs=1e-5)
    # One pair alone gives the same P(match) as in the batch.
    single = stub.Match(ensemble_pb2.MatchRequest(query=query, candidate=PETS))
    assert single.p_match == pytest.approx(pets.p_match, abs=1e-5)


@pytest.mark.models
def test_bad_requests_are_invalid_argument(stub: ensemble_pb2_grpc.EnsembleServiceStub) -> None:
    with pytest.raises(grpc.RpcError) as caught:
        stub.Match(ensemble_pb2.MatchRequest(query=" ", candidate=NOVEL))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "query" in (caught.value.details() or "")
    with pytest.raises(grpc.RpcError) as caught:
        stub.BatchMatch(ensemble_pb2.BatchMatchRequest())
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "items must not be empty" in (caught.value.details() or "")


@pytest.mark.models
def test_a_missing_artifact_fails_the_load_with_what_to_do(tmp_path: Path) -> None:
    settings = load_settings(
        "tiny",
        server={"port": 0, "metrics_port": None},
        ensemble={"matcher": "features", "features_artifact": str(tmp_path / "absent.json")},
    )
    host = build_host(settings)
    host.start()
    try:
        assert not host.wait_until_ready(60)
        assert "tribunal-lab eval matching-features" in str(host.load_error)
    finally:
        host.stop(0)


@pytest.mark.models
def test_concurrent_calls_share_the_embedders_passes(
    stub: ensemble_pb2_grpc.EnsembleServiceStub, settings: Settings
) -> None:
    """Calls arriving while the MPNet worker is busy wait together and go into one pass:
    the service does not queue them one behind the other."""
    import threading

    from tribunal.embedding import shared_profile_embedder

    artifact = MatchFeaturesArtifact.load(features_path(settings))
    embedder = shared_profile_embedder(settings, artifact.embedder.model_key)
    stub.Match(ensemble_pb2.MatchRequest(query="warm-up", candidate=PETS))  # entry cached
    # A long call keeps the worker busy while the eight requests arrive.
    busy = threading.Thread(
        target=embedder.embed, args=([f"{NOVEL.answer} {n}" * 12 for n in range(64)],)
    )
    busy.start()
    passes, calls = embedder.passes_, embedder.calls_
    queries = [f"Is the new coronavirus number {n} dangerous?" for n in range(8)]
    replies: dict[str, float] = {}

    def ask(query: str) -> None:
        reply = stub.Match(ensemble_pb2.MatchRequest(query=query, candidate=PETS), timeout=120)
        replies[query] = reply.p_match

    askers = [threading.Thread(target=ask, args=(q,)) for q in queries]
    for thread in askers:
        thread.start()
    for thread in [busy, *askers]:
        thread.join(180)
    assert sorted(replies) == sorted(queries)
    # The long call, then the eight queries in at most two passes (not eight).
    assert embedder.calls_ - calls == 9
    assert embedder.passes_ - passes <= 3
