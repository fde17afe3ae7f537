"""The relevance judge on the tiny profile's real models, through real gRPC servers.

Features: the 135M model's P(yes) under ``relevance/yesno@1`` (llama.cpp or transformers) and the
MiniLM cosine; coefficients chosen per test (tests/integration/_relevance.py). Checked:
the verdict is the artifact's formula over the features it reports; the features are
the models' own numbers; ``EnsembleService.JudgeRelevance`` over gRPC (and its
INVALID_ARGUMENT / FAILED_PRECONDITION); ``Gateway.Label`` routing by the artifact's
threshold and band with a real ensemble stage and a scripted debate.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from tribunal.core import Settings, load_settings
from tribunal.core.storage import Database
from tribunal.ensemble import RelevanceItem, RelevanceJudge
from tribunal.ensemble.servicer import build_host as build_ensemble_host
from tribunal.gateway.servicer import build_host as build_gateway_host
from tribunal.v1 import common_pb2, ensemble_pb2, ensemble_pb2_grpc, gateway_pb2, gateway_pb2_grpc

from tests.integration import _scripted_stages
from tests.integration._relevance import tiny_artifact, write_tiny_artifact

from ._llm_backend import LLM_BACKEND

pytestmark = pytest.mark.models

QUERY = "how long does it take for symptoms to appear after exposure"
RELEVANT = "Symptoms usually appear 2 to 14 days after exposure to the virus."
OFF_TOPIC = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."


def _settings(**ensemble: object) -> Settings:
    # The 135M judge alone, majority of one: Match needs no trained artifact.
    return load_settings(
        "tiny",
        llm_backend=LLM_BACKEND,
        server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
        ensemble={
            "matcher": "judges",
            "judges": ["llm_tiny/ral2m"],
            "aggregator": "majority",
            **ensemble,
        },
    )


@pytest.fixture(scope="module")
def judge() -> RelevanceJudge:
    return RelevanceJudge.from_settings(_settings(), tiny_artifact())


def _sigmoid_of_formula(coef: tuple[float, ...], intercept: float, values: list[float]) -> float:
    p_yes = min(max(values[0], 1e-6), 1 - 1e-6)
    z = intercept + coef[0] * math.log(p_yes / (1 - p_yes)) + coef[1] * values[1]
    return 1.0 / (1.0 + math.exp(-z))


def test_the_verdict_is_the_artifacts_formula_over_the_models_features(
    judge: RelevanceJudge,
) -> None:
    from tribunal.core.llm import shared_engine
    from tribunal.prompts import get_prompt

    relevant, off_topic = judge.judge(
        [RelevanceItem(QUERY, RELEVANT, ("2 to 14 days",)), RelevanceItem(QUERY, OFF_TOPIC)]
    )
    for verdict in (relevant, off_topic):
        assert [name for name, _ in verdict.features] == ["llm_tiny/yesno", "embedder/cosine"]
        values = [value for _, value in verdict.features]
        assert 0.0 <= values[0] <= 1.0
        assert -1.0 <= values[1] <= 1.0
        assert 0.0 < verdict.p_relevant < 1.0
        expected = _sigmoid_of_formula((1.0, 2.0), -0.5, values)
        assert verdict.p_relevant == pytest.approx(expected, abs=1e-6)
        assert verdict.relevant == (verdict.p_relevant >= 0.5)
        assert verdict.prompt_tokens > 0
    # The features are the models' own numbers, not the judge's: P(yes) read from the
    # engine on the rendered prompt, the cosine of the embedder's unit vectors.
    engine = shared_engine(_settings(), "llm_tiny", backend=LLM_BACKEND)
    prompt = get_prompt("relevance/yesno@1").render(engine, query=QUERY, passage=RELEVANT)
    # llama.cpp picks other matmul kernels when a reused prefix shortens the tokens it
    # evaluates: the same prompt moves by up to ~0.03 (see test_llm_engine.py).
    assert relevant.features[0][1] == pytest.approx(engine.judge([prompt]).p_yes[0], abs=0.04)
    vectors = judge.embedders["embedder"].embed([QUERY, RELEVANT, OFF_TOPIC])
    assert relevant.features[1][1] == pytest.approx(float(vectors[0] @ vectors[1]), abs=1e-5)
    assert off_topic.features[1][1] == pytest.approx(float(vectors[0] @ vectors[2]), abs=1e-5)
    # MiniLM sees the on-topic passage as closer to the query than the Eiffel Tower.
    assert relevant.features[1][1] > off_topic.features[1][1]


def test_bad_items_are_invalid_argument_before_any_model_runs(judge: RelevanceJudge) -> None:
    from tribunal.core import InvalidArgumentError

    with pytest.raises(InvalidArgumentError, match="chunk must be non-empty") as caught:
        judge.judge([RelevanceItem(QUERY, RELEVANT), RelevanceItem(QUERY, "  ")])
    assert caught.value.field == "items[1].chunk"
    with pytest.raises(InvalidArgumentError, match="query must be non-empty"):
        judge.judge([RelevanceItem("", RELEVANT)])
    with pytest.raises(InvalidArgumentError, match=r"ensemble\.max_chunk_chars"):
        judge.judge([RelevanceItem(QUERY, "x" * (judge.max_chunk_chars + 1))])
    with pytest.raises(InvalidArgumentError, match="answers must be non-empty"):
        judge.judge([RelevanceItem(QUERY, RELEVANT, ("",))])


# -- over gRPC -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ensemble_pb2_grpc.EnsembleServiceStub]:
    path = write_tiny_artifact(tmp_path_factory.mktemp("relevance") / "relevance.json")
    # As label jobs run it: the relevance judge loaded up front, no matching panel.
    host = build_ensemble_host(
        _settings(relevance_artifact=str(path)), serve_match=False, preload_relevance=True
    )
    port = host.start()
    assert host.wait_until_ready(600), host.load_error
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield ensemble_pb2_grpc.EnsembleServiceStub(channel)
    host.stop(0)


def test_judge_relevance_over_grpc(
    served: ensemble_pb2_grpc.EnsembleServiceStub, judge: RelevanceJudge
) -> None:
    response = served.JudgeRelevance(
        ensemble_pb2.JudgeRelevanceRequest(
            query=QUERY, chunk=RELEVANT, answers=["2 to 14 days"], item_id="item-7"
        ),
        timeout=120,
    )
    assert response.item_id == "item-7"
    assert response.artifact_version == "rel-test"
    assert (response.threshold, response.band_low, response.band_high) == (0.5, 0.3, 0.7)
    values = [f.value for f in response.features]
    assert [f.name for f in response.features] == ["llm_tiny/yesno", "embedder/cosine"]
    assert response.p_relevant == pytest.approx(_sigmoid_of_formula((1.0, 2.0), -0.5, values))
    assert response.relevant == (response.p_relevant >= 0.5)
    assert response.usage.prompt_tokens > 0
    # The served judge answers as the in-process one (the same models and artifact).
    [direct] = judge.judge([RelevanceItem(QUERY, RELEVANT)])
    assert values[1] == pytest.approx(direct.features[1][1], abs=1e-5)
    assert values[0] == pytest.approx(direct.features[0][1], abs=0.04)
    with pytest.raises(grpc.RpcError) as empty:
        served.JudgeRelevance(ensemble_pb2.JudgeRelevanceRequest(query=QUERY, chunk=""))
    assert empty.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "chunk must be non-empty" in (empty.value.details() or "")
    # serve_match=False: no matching panel was loaded, and Match says so.
    candidate = common_pb2.KbEntry(id="a", question=QUERY, answer=RELEVANT)
    with pytest.raises(grpc.RpcError) as match:
        served.Match(ensemble_pb2.MatchRequest(query=QUERY, candidate=candidate))
    assert match.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "serves JudgeRelevance only" in (match.value.details() or "")


def test_without_an_artifact_match_is_served_and_the_log_says_what_to_create(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    missing = tmp_path / "nowhere" / "relevance.json"
    host = build_ensemble_host(_settings(relevance_artifact=str(missing)), preload_relevance=True)
    port = host.start()
    try:
        assert host.wait_until_ready(600), host.load_error
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = ensemble_pb2_grpc.EnsembleServiceStub(channel)
            candidate = common_pb2.KbEntry(id="a", question=QUERY, answer=RELEVANT)
            match = stub.Match(ensemble_pb2.MatchRequest(query=QUERY, candidate=candidate))
            assert 0.0 <= match.p_match <= 1.0
            request = ensemble_pb2.JudgeRelevanceRequest(query=QUERY, chunk=RELEVANT)
            # The server's problem, not the caller's: FAILED_PRECONDITION, and what to fix
            # goes to the server log (under the error id the caller gets), not to the caller.
            with caplog.at_level(logging.ERROR), pytest.raises(grpc.RpcError) as caught:
                stub.JudgeRelevance(request)
            assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "the server is misconfigured (id " in (caught.value.details() or "")
            assert str(missing) not in (caught.value.details() or "")
            assert f"no relevance artifact at {missing}: create it" in caplog.text
            missing.parent.mkdir()
            missing.write_text('{"format": "tribunal.relevance/0"}')
            caplog.clear()
            with caplog.at_level(logging.ERROR), pytest.raises(grpc.RpcError) as bad:
                stub.JudgeRelevance(request)
            assert bad.value.code() == grpc.StatusCode.FAILED_PRECONDITION
            assert "this build reads 'tribunal.relevance/1'" not in (bad.value.details() or "")
            assert "this build reads 'tribunal.relevance/1'" in caplog.text
            # Created later, it is picked up without a restart.
            write_tiny_artifact(missing, version="rel-late")
            assert stub.JudgeRelevance(request, timeout=120).artifact_version == "rel-late"
    finally:
        host.stop(0)


# -- Gateway.Label routes by the artifact ----------------------------------------------------


@pytest.fixture(scope="module")
def scripted() -> Iterator[tuple[str, _scripted_stages.Script]]:
    script = _scripted_stages.Script()  # the debate agrees: RELEVANT
    host = _scripted_stages.start(script)
    yield f"127.0.0.1:{host.port}", script
    host.stop(0)


def _label(
    tmp_path: Path, scripted: tuple[str, _scripted_stages.Script], mode: int, **artifact: object
) -> gateway_pb2.LabelResponse:
    address, script = scripted
    path = write_tiny_artifact(tmp_path / "relevance.json", **artifact)
    ensemble = build_ensemble_host(_settings(relevance_artifact=str(path)))
    gateway = None
    try:
        port = ensemble.start()
        assert ensemble.wait_until_ready(600), ensemble.load_error
        addresses = dict.fromkeys(("retrieval", "entailment", "confidence", "debate"), address)
        settings = load_settings(
            "tiny",
            server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
            database_url=f"sqlite:///{tmp_path}/audit.db",
            gateway={
                "discovery": "grpc",
                "addresses": {**addresses, "ensemble": f"127.0.0.1:{port}"},
            },
        )
        gateway = build_gateway_host(settings)
        gateway_port = gateway.start()
        assert gateway.wait_until_ready(20), gateway.load_error
        script.calls.clear()
        with grpc.insecure_channel(f"127.0.0.1:{gateway_port}") as channel:
            response: gateway_pb2.LabelResponse = gateway_pb2_grpc.GatewayServiceStub(
                channel
            ).Label(
                gateway_pb2.LabelRequest(
                    query=QUERY, chunk=RELEVANT, answers=["2 to 14 days"], mode=mode, item_id="i1"
                ),
                timeout=300,
            )
        record = Database(settings.database_url).decision(response.audit_id)
        assert record.versions["ensemble"]["artifact"] == "rel-test"
        assert set(record.signals["judges"]["features"]) == {"llm_tiny/yesno", "embedder/cosine"}
        assert record.signals["judges"]["p_relevant"] == response.p_relevant
        return response
    finally:
        if gateway is not None:
            gateway.stop(0)
        ensemble.stop(0)


CASCADE = gateway_pb2.LABEL_MODE_CASCADE
JUDGE = gateway_pb2.LABEL_MODE_JUDGE


@pytest.mark.parametrize(
    "case",
    [
        # z >= 30 - 9.2 - 2 whatever the features: p >= band_high, the judges say RELEVANT.
        (CASCADE, {"intercept": 30.0}, common_pb2.LABEL_RELEVANT, "JUDGES", (1 - 1e-8, 1.0)),
        # z <= -30 + 9.2 + 2: p <= band_low, IRRELEVANT without a debate.
        (CASCADE, {"intercept": -30.0}, common_pb2.LABEL_IRRELEVANT, "JUDGES", (0.0, 1e-8)),
        # The band covers [0, 1]: every item goes to the debate (scripted: agreed RELEVANT).
        (CASCADE, {"band": (0.0, 1.0)}, common_pb2.LABEL_RELEVANT, "DEBATE", (0.0, 1.0)),
        # Zero weights: p = 0.5 exactly; judge mode compares it with the artifact's
        # threshold, 0.6 here (not 0.5): IRRELEVANT.
        (
            JUDGE,
            {"coef": (0.0, 0.0), "intercept": 0.0, "threshold": 0.6, "band": (0.4, 0.7)},
            common_pb2.LABEL_IRRELEVANT,
            "JUDGES",
            (0.5, 0.5),
        ),
    ],
    ids=["cascade-sure-relevant", "cascade-sure-irrelevant", "cascade-unsure", "judge-threshold"],
)
def test_label_routes_by_the_artifacts_threshold_and_band(
    tmp_path: Path,
    scripted: tuple[str, _scripted_stages.Script],
    case: tuple[int, dict[str, object], int, str, tuple[float, float]],
) -> None:
    mode, artifact, label, source, p_range = case
    response = _label(tmp_path, scripted, mode, **artifact)
    assert response.label == label
    assert gateway_pb2.LabelSource.Name(response.source) == f"LABEL_SOURCE_{source}"
    assert ("debate" in scripted[1].calls) == (source == "DEBATE")
    assert p_range[0] <= response.p_relevant <= p_range[1]
    assert response.usage.prompt_tokens > 0


def test_the_ray_deployment_honours_serve_match_too(tmp_path: Path) -> None:
    """The Ray app's replica class, built as Serve builds it (no cluster needed for its
    constructor): relevance-only means no matcher loaded and Match refused as over gRPC."""
    import asyncio

    from tribunal.core import FailedPreconditionError
    from tribunal.ensemble import MatchRequestItem
    from tribunal.ensemble.app import EnsembleDeployment
    from tribunal.kb import KbEntry

    path = write_tiny_artifact(tmp_path / "relevance.json")
    settings = _settings(relevance_artifact=str(path))
    replica = EnsembleDeployment.func_or_class(settings.model_dump(mode="json"), serve_match=False)
    assert replica._matcher is None  # no matching models were loaded
    item = MatchRequestItem(QUERY, KbEntry(id="a", question=QUERY, answer=RELEVANT))
    with pytest.raises(FailedPreconditionError, match="serves JudgeRelevance only"):
        asyncio.run(replica.match([item]))
