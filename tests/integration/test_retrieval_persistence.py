"""Durability and visibility of writes, on disk, with the real MiniLM embedder."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tribunal.core import RetrievalSettings
from tribunal.kb import KbEntry
from tribunal.retrieval import KnowledgeBase, SearchMode, SearchQuery

from tests.conftest import REPO
from tests.integration._retrieval import (
    COLLECTION,
    ENTRIES,
    CountingEmbedder,
    minilm,
    open_kb,
)

pytestmark = pytest.mark.models


def _ids(kb: KnowledgeBase, text: str, mode: SearchMode = SearchMode.HYBRID) -> list[str]:
    result = kb.search(SearchQuery(COLLECTION, text, top_k=10, mode=mode))
    return [hit.entry.id for hit in result.hits]


def test_upserts_replacements_and_deletes_are_visible_to_the_next_search(tmp_path: Path) -> None:
    kb = open_kb(tmp_path)
    assert kb.upsert(COLLECTION, ENTRIES, create=True).total_entries == 5
    for mode in SearchMode:
        assert _ids(kb, "how long to wash hands with soap", mode)[0] == "handwashing"
    hit = kb.search(SearchQuery(COLLECTION, "virus droplets from sneezes", top_k=1)).hits[0]
    assert (hit.entry.id, hit.matched_unit_id) == ("spread", "c0")
    assert (hit.dense_rank, hit.sparse_rank) == (1, 1)
    assert hit.entry == ENTRIES[0]  # returned verbatim, metadata and chunks included

    replaced = KbEntry("pets", "Can cats and dogs get infected?", "Rarely; keep sick pets home.")
    assert kb.upsert(COLLECTION, [replaced]).total_entries == 5
    top = kb.search(SearchQuery(COLLECTION, "can dogs get the virus", top_k=1)).hits[0]
    assert top.entry == replaced

    result = kb.delete(COLLECTION, ["pets", "never-existed"])
    assert (result.deleted, result.missing_ids) == (1, ("never-existed",))
    for mode in SearchMode:
        assert "pets" not in _ids(kb, "can dogs get the virus", mode)
    assert kb.stats(COLLECTION)[0].entries == 4

    kb.upsert(COLLECTION, [replaced])
    assert _ids(kb, "can dogs get the virus")[0] == "pets"
    kb.close()


def test_a_fresh_object_on_the_same_directory_sees_acknowledged_writes(tmp_path: Path) -> None:
    first = open_kb(tmp_path, snapshot_every_changes=1_000_000)
    first.upsert(COLLECTION, ENTRIES, create=True)
    first.delete(COLLECTION, ["masks"])
    # No close, no snapshot: a second service object (as another process would) reads the store.
    counting = CountingEmbedder(minilm())
    second = KnowledgeBase(tmp_path, counting, RetrievalSettings())
    assert counting.texts == 0  # reloaded from stored embeddings, nothing re-embedded
    assert second.stats(COLLECTION)[0].entries == 4
    assert _ids(second, "incubation period days")[0] == "incubation"
    assert "masks" not in _ids(second, "face mask in public")
    # And back: the first object replays the second one's writes from the change log.
    second.upsert(COLLECTION, [KbEntry("vaccine", "Is there a vaccine?", "Several exist.")])
    second.delete(COLLECTION, ["pets"])
    assert _ids(first, "is a vaccine available")[0] == "vaccine"
    assert "pets" not in _ids(first, "can my cat catch covid")
    # A collection the other object created is found too.
    second.upsert("other", [KbEntry("x", "Where is the nearest test site?", "Ask.")], create=True)
    assert first.search(SearchQuery("other", "test site", top_k=1)).hits[0].entry.id == "x"
    assert first.collection_names() == [COLLECTION, "other"]
    first.close()
    second.close()


def test_a_killed_writer_loses_nothing_it_acknowledged(tmp_path: Path) -> None:
    writer = subprocess.Popen(
        [sys.executable, "-m", "tests.integration._retrieval", str(tmp_path)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    try:
        assert writer.stdout is not None
        assert writer.stdout.readline().strip() == "ACK"
    finally:
        writer.send_signal(signal.SIGKILL)  # no close(), no snapshot, no atexit
        writer.wait(30)
    assert not (tmp_path / COLLECTION / "snapshot").exists()
    counting = CountingEmbedder(minilm())
    kb = KnowledgeBase(tmp_path, counting, RetrievalSettings())
    assert counting.texts == 0
    stats = kb.stats(COLLECTION)[0]
    assert stats.entries == 5  # 5 upserted, "masks" deleted, "masks-v2" added
    assert _ids(kb, "do masks protect me")[0] == "masks-v2"
    assert "masks" not in _ids(kb, "face mask in public")
    kb.close()


def test_snapshot_load_then_log_replay_gives_the_same_answers(tmp_path: Path) -> None:
    first = open_kb(tmp_path)
    first.upsert(COLLECTION, ENTRIES, create=True)
    first.close()  # writes a snapshot
    assert (tmp_path / COLLECTION / "snapshot" / "manifest.json").is_file()
    second = open_kb(tmp_path, snapshot_every_changes=1_000_000)  # loads the snapshot
    second.upsert(COLLECTION, [KbEntry("vaccine", "Is there a vaccine?", "Several exist.")])
    second.delete(COLLECTION, ["spread"])
    third = open_kb(tmp_path)  # snapshot + replay of the two logged changes
    for query in ("is a vaccine available", "how does it spread", "wash hands"):
        assert _ids(third, query) == _ids(second, query)
    assert "spread" not in _ids(third, "how does the coronavirus spread")
    assert third.stats(COLLECTION) == second.stats(COLLECTION)
    second.close()
    third.close()


def test_the_index_type_follows_size_and_compaction_keeps_results(tmp_path: Path) -> None:
    kb = open_kb(tmp_path, flat_max_vectors=8, compact_dead_fraction=0.3)
    kb.upsert(COLLECTION, ENTRIES[:3], create=True)
    # Two units (vectors) per entry: the question and a chunk or the answer.
    assert kb.stats(COLLECTION)[0].index_type == "IndexFlatIP"  # 6 vectors
    kb.upsert(COLLECTION, ENTRIES[3:])  # 10 vectors: crosses the threshold of 8
    assert kb.stats(COLLECTION)[0].index_type == "IndexHNSWFlat"
    assert _ids(kb, "dog or cat", SearchMode.DENSE)[0] == "pets"
    kb.delete(COLLECTION, ["spread", "masks"])  # 4 of 10 rows dead: compaction rebuilds
    collection = kb.collection(COLLECTION)
    assert collection.dense.dead_rows == 0
    assert collection.stats().index_type == "IndexFlatIP"  # 6 live vectors
    assert _ids(kb, "dog or cat", SearchMode.DENSE)[0] == "pets"
    kb.close()
