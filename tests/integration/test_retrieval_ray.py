"""The retrieval Ray Serve application on a real local Ray: same hits as in-process."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from tribunal.core import load_settings
from tribunal.retrieval import KnowledgeBase, SearchMode, SearchQuery

from tests.conftest import REPO
from tests.integration._retrieval import COLLECTION, ENTRIES, minilm

pytestmark = [pytest.mark.models, pytest.mark.slow]


@pytest.fixture
def local_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A single-node Ray for this test only, temp files in .build/ray, shut down after."""
    import ray
    from ray import serve

    # Ray 2.60 turns on token auth for a new local cluster unless RAY_AUTH_MODE is
    # set; this throwaway cluster is loopback-only, so it runs without (and writes
    # no ~/.ray/auth_token).
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    temp_dir = REPO / ".build" / "ray"
    temp_dir.mkdir(parents=True, exist_ok=True)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(temp_dir),
        _node_ip_address="127.0.0.1",
        logging_level="WARNING",
        runtime_env={"env_vars": {"TRIBUNAL_DATA_DIR": os.environ["TRIBUNAL_DATA_DIR"]}},
    )
    try:
        serve.start(proxy_location="Disabled")
        yield
    finally:
        serve.shutdown()
        ray.shutdown()


@pytest.mark.usefixtures("local_ray")
def test_search_through_the_deployment_handle_matches_in_process(tmp_path: Path) -> None:
    from ray import serve
    from tribunal.retrieval.app import build_app

    settings = load_settings(
        "tiny",
        data_dir=str(tmp_path),
        retrieval={"deployment": {"num_cpus": 1, "max_batch_size": 4, "max_ongoing_requests": 8}},
    )
    local = KnowledgeBase(settings.data_dir / "retrieval", minilm(), settings.retrieval)
    local.upsert(COLLECTION, ENTRIES, create=True)
    local.close()

    handle = serve.run(build_app(settings), name="retrieval", route_prefix=None)
    queries = [
        SearchQuery(COLLECTION, text, top_k=5, mode=mode)
        for text in ("how long to wash hands", "can pets catch it", "mask in public")
        for mode in SearchMode
    ]

    async def concurrently() -> list[object]:
        # Concurrent single searches: their queries meet in @serve.batch's embed batch.
        return list(await asyncio.gather(*(handle.search.remote(q) for q in queries)))

    remote = asyncio.run(concurrently())
    local = KnowledgeBase(settings.data_dir / "retrieval", minilm(), settings.retrieval)
    for query, result in zip(queries, remote, strict=True):
        expected = local.search(query)
        got = [(h.entry.id, h.matched_unit_id, h.dense_rank, h.sparse_rank) for h in result.hits]
        assert got == [
            (h.entry.id, h.matched_unit_id, h.dense_rank, h.sparse_rank) for h in expected.hits
        ]
        assert [h.score for h in result.hits] == pytest.approx([h.score for h in expected.hits])

    # Writes through the handle are durable and visible to the in-process reader.
    from tribunal.retrieval import KbEntry

    written = handle.upsert.remote(COLLECTION, [KbEntry("vaccine", "Is there a vaccine?", "Yes.")])
    assert written.result(timeout_s=60).total_entries == 6
    assert local.search(SearchQuery(COLLECTION, "vaccine available", top_k=1)).hits[0].entry.id == (
        "vaccine"
    )
    stats = handle.stats.remote(COLLECTION).result(timeout_s=60)
    assert stats[0].entries == 6
    local.close()
