"""The entailment Ray Serve application on a real local Ray: concurrent single pairs
are batched by ``@serve.batch`` and give the in-process cascade's verdicts.

The cascade runs the model-free lexical checker in one stage, so the test measures
the deployment, not a model (the models are tested in test_entailment_service.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tribunal.core import load_settings
from tribunal.entailment import PairToCheck, build_cascade, checker_version
from tribunal.entailment.servicer import EntailmentServicer
from tribunal.v1 import entailment_pb2

pytestmark = pytest.mark.ray

PREMISE = "Masks reduce the spread of respiratory droplets. Hand washing removes the virus."
HYPOTHESES = [
    "Masks reduce droplets spread.",
    "Hand washing kills bacteria.",
    "Vaccines cause autism.",
    "Washing hands removes the virus.",
]


@pytest.mark.usefixtures("local_ray")
def test_concurrent_single_pairs_through_the_handle_match_in_process() -> None:
    from ray import serve
    from tribunal.entailment.app import build_app

    settings = load_settings(
        "tiny",
        entailment={
            "fast_backend": "lexical",
            "two_stage": False,
            "deployment": {"num_cpus": 0.5, "max_batch_size": 4, "max_ongoing_requests": 8},
        },
    )
    handle = serve.run(build_app(settings), name="entailment", route_prefix=None)
    pairs = [PairToCheck(PREMISE, h) for h in HYPOTHESES]

    async def concurrently() -> list[Any]:
        return list(await asyncio.gather(*(handle.check.remote([p]) for p in pairs)))

    remote = [verdicts[0] for verdicts in asyncio.run(concurrently())]
    expected = build_cascade(settings).check(pairs)
    assert [(v.p_entail, v.label) for v in remote] == [(v.p_entail, v.label) for v in expected]

    proto = handle.Check.remote(
        entailment_pb2.CheckRequest(
            pairs=[entailment_pb2.EntailmentPair(premise=PREMISE, hypothesis=HYPOTHESES[0])]
        )
    ).result(timeout_s=60)
    assert proto.results[0].p_entail == pytest.approx(expected[0].p_entail)
    assert proto.results[0].label == entailment_pb2.ENTAILMENT_LABEL_ENTAILED

    # Both adapters translate with the same functions: the same request, the same reply.
    request = entailment_pb2.CheckRequest(
        pairs=[entailment_pb2.EntailmentPair(premise=PREMISE, hypothesis=h) for h in HYPOTHESES]
    )
    servicer = EntailmentServicer(build_cascade(settings), checker_version(settings))
    direct = servicer.Check(request, None)  # type: ignore[arg-type]
    assert handle.Check.remote(request).result(timeout_s=60) == direct
    quotes = entailment_pb2.CheckQuotesRequest(
        quotes=[entailment_pb2.QuoteQuery(premise=PREMISE, quote="Hand washing removes")]
    )
    served = handle.CheckQuotes.remote(quotes).result(timeout_s=60)
    assert served == servicer.CheckQuotes(quotes, None)  # type: ignore[arg-type]
    assert served.matches[0].found
