"""The ensemble Ray Serve application on a real local Ray: concurrent single pairs are
batched by ``@serve.batch`` and give the in-process matcher's verdicts.

Majority over the 135M judge on llama.cpp (no artifact needed): the test measures the
deployment, not the model's skill.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tribunal.core import load_settings
from tribunal.ensemble import EnsembleMatcher, MatchRequestItem
from tribunal.retrieval import KbEntry
from tribunal.v1 import common_pb2, ensemble_pb2

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
def test_concurrent_single_pairs_through_the_handle_match_in_process() -> None:
    from ray import serve
    from tribunal.ensemble.app import build_app

    settings = load_settings(
        "tiny",
        llm_backend="llamacpp",
        ensemble={
            "aggregator": "majority",
            "judges": ["llm_tiny/ral2m"],
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
