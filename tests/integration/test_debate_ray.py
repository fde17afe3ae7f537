"""The debate Ray Serve application on a real local Ray: concurrent single items are
gathered by ``@serve.batch`` and give the in-process debate's results.

Agents: the real SmolLM2-135M on llama.cpp or transformers (one round, short answers), so the test
measures the deployment, not a model's judgment.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from tribunal.core import load_settings
from tribunal.debate import DebateItem, build_debate
from tribunal.v1 import debate_pb2

from ._llm_backend import LLM_BACKEND

pytestmark = pytest.mark.ray

ITEMS = [
    DebateItem(query="capital of france", chunk="Paris is the capital of France.", item_id="a"),
    DebateItem(query="tallest mountain", chunk="Mount Everest is 8,849 m high.", item_id="b"),
    DebateItem(query="boiling point of water", chunk="Cats sleep a lot.", item_id="c"),
]


@pytest.mark.models
@pytest.mark.extended  # test_serve_stack deploys this app with the others in CI
@pytest.mark.usefixtures("local_ray")
def test_concurrent_single_items_through_the_handle_match_in_process() -> None:
    from ray import serve
    from tribunal.debate.app import build_app

    base = load_settings("tiny")
    assert base.roles is not None
    settings = load_settings(
        "tiny",
        llm_backend=LLM_BACKEND,
        llm={"n_threads": 1},
        roles={**base.roles.model_dump(), "debate_agents": ["llm_tiny", "llm_tiny"]},
        debate={
            "max_rounds": 1,
            "max_new_tokens": 48,
            "deployment": {"num_cpus": 0.5, "max_batch_size": 4, "max_ongoing_requests": 8},
        },
    )
    handle = serve.run(build_app(settings), name="debate", route_prefix=None)

    async def concurrently() -> list[Any]:
        return list(await asyncio.gather(*(handle.assess.remote(item) for item in ITEMS)))

    remote = asyncio.run(concurrently())
    expected = build_debate(settings).assess_many(ITEMS)
    assert [(r.item_id, r.outcome, r.label) for r in remote] == [
        (r.item_id, r.outcome, r.label) for r in expected
    ]
    assert [r.rounds[0].turns[0].rationale for r in remote] == [
        r.rounds[0].turns[0].rationale for r in expected
    ]

    proto = handle.Assess.remote(
        debate_pb2.AssessRequest(query=ITEMS[0].query, chunk=ITEMS[0].chunk, item_id="a")
    ).result(timeout_s=300)
    assert proto.item_id == "a"
    assert len(proto.rounds) == 1
