"""The retrieval Ray Serve application on a real local Ray: same hits as in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tribunal.core import load_settings
from tribunal.retrieval import KnowledgeBase, SearchMode, SearchQuery

from tests.integration._retrieval import COLLECTION, ENTRIES, minilm

pytestmark = [pytest.mark.ray, pytest.mark.models]  # ~45 s: a Ray start, a replica loading MiniLM


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
        # Embedded in a batch of several (padding) vs alone: float32 scores move by ~1e-7.
        scores = [h.score for h in expected.hits]
        assert [h.score for h in result.hits] == pytest.approx(scores, abs=1e-5)

    # Writes through the handle are durable and visible to the in-process reader.
    from tribunal.kb import KbEntry

    written = handle.upsert.remote(COLLECTION, [KbEntry("vaccine", "Is there a vaccine?", "Yes.")])
    assert written.result(timeout_s=60).total_entries == 6
    assert local.search(SearchQuery(COLLECTION, "vaccine available", top_k=1)).hits[0].entry.id == (
        "vaccine"
    )
    stats = handle.stats.remote(COLLECTION).result(timeout_s=60)
    assert stats[0].entries == 6
    local.close()
