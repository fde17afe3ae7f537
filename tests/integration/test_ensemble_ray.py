"""The ensemble Ray Serve application on a real local Ray: concurrent single pairs are
batched by ``@serve.batch`` and give the in-process matcher's verdicts; the relevance
judge answers ``JudgeRelevance`` through the gateway's Ray transport as in process.

Majority over the 135M judge on llama.cpp or transformers (no artifact needed): the test
measures the deployment, not the model's skill.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from tribunal.core import InvalidArgumentError, load_settings
from tribunal.ensemble import EnsembleMatcher, MatchRequestItem, RelevanceItem, RelevanceJudge
from tribunal.kb import KbEntry
from tribunal.v1 import common_pb2, ensemble_pb2

from tests.integration._relevance import write_tiny_artifact

from ._llm_backend import LLM_BACKEND

pytestmark = pytest.mark.ray

ENTRY = KbEntry(
    id="faq-1",
    question="How does the virus spread?",
    answer="Mainly between people who are in close contact with one another.",
)
QUERIES = [
    "How is the virus transmitted?",
    "Can my dog catch the virus?",
    "What are the symptoms?",
    "Does the virus spread between people?",
]


@pytest.mark.models
@pytest.mark.extended  # test_serve_stack deploys this app with the others in CI
@pytest.mark.slow  # ~40 s of Ray start-up and replica load; 2 min on a busy machine
@pytest.mark.usefixtures("local_ray")
def test_concurrent_single_pairs_through_the_handle_match_in_process(tmp_path: Path) -> None:
    from ray import serve
    from tribunal.ensemble.app import build_app
    from tribunal.gateway._ray_transport import RayServeTransport

    relevance = write_tiny_artifact(tmp_path / "relevance.json")
    settings = load_settings(
        "tiny",
        llm_backend=LLM_BACKEND,
        ensemble={
            "matcher": "judges",
            "aggregator": "majority",
            "judges": ["llm_tiny/ral2m"],
            "relevance_artifact": str(relevance),
            "deployment": {"num_cpus": 0.5, "max_batch_size": 4, "max_ongoing_requests": 8},
        },
    )
    handle = serve.run(build_app(settings), name="ensemble", route_prefix=None)
    items = [MatchRequestItem(q, ENTRY) for q in QUERIES]

    async def concurrently() -> list[Any]:
        return list(await asyncio.gather(*(handle.match.remote([i]) for i in items)))

    remote = [results[0] for results in asyncio.run(concurrently())]
    matcher = EnsembleMatcher.from_settings(settings)
    try:
        expected = matcher.match(items)
    finally:
        matcher.close()
    for got, want in zip(remote, expected, strict=True):
        # Equal up to llama.cpp's kernel choice with another reused prefix (~0.03).
        assert got.judges[0].p_yes == pytest.approx(want.judges[0].p_yes, abs=0.04)
        assert got.match == want.match
        assert got.aggregator == "majority"

    proto = handle.Match.remote(
        ensemble_pb2.MatchRequest(
            query=QUERIES[0],
            candidate=common_pb2.KbEntry(id="faq-1", question=ENTRY.question, answer=ENTRY.answer),
        )
    ).result(timeout_s=120)
    assert proto.judges[0].p_yes == pytest.approx(expected[0].judges[0].p_yes, abs=0.04)
    assert proto.aggregator == "majority"
    assert proto.artifact_version == ""

    # JudgeRelevance as the gateway calls it (by name, through the Ray transport);
    # concurrent single items join one Serve batch.
    transport = RayServeTransport({})
    chunks = [ENTRY.answer, "The Eiffel Tower was completed in 1889."]
    requests = [
        ensemble_pb2.JudgeRelevanceRequest(query=QUERIES[0], chunk=c, item_id=f"i{n}")
        for n, c in enumerate(chunks)
    ]

    async def relevance_concurrently() -> list[Any]:
        return list(await asyncio.gather(*(handle.JudgeRelevance.remote(r) for r in requests)))

    served = asyncio.run(relevance_concurrently())
    served[0] = transport.call("ensemble", "JudgeRelevance", requests[0], 120)
    judge = RelevanceJudge.from_settings(settings)
    direct = judge.judge([RelevanceItem(QUERIES[0], c) for c in chunks])
    for got, want, request in zip(served, direct, requests, strict=True):
        assert got.item_id == request.item_id
        assert got.artifact_version == "rel-test"
        assert [f.name for f in got.features] == [name for name, _ in want.features]
        assert got.features[0].value == pytest.approx(want.features[0][1], abs=0.04)
        assert got.features[1].value == pytest.approx(want.features[1][1], abs=1e-5)
    with pytest.raises(InvalidArgumentError, match="chunk must be non-empty"):
        transport.call(
            "ensemble", "JudgeRelevance", ensemble_pb2.JudgeRelevanceRequest(query="q"), 60
        )
