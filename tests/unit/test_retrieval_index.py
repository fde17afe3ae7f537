"""Dense (FAISS) and sparse (bm25s) indexes: type by size, tombstones, snapshots."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tribunal.core import RetrievalSettings
from tribunal.retrieval import DenseIndex
from tribunal.retrieval._dense import choose_index_type, gpu_count
from tribunal.retrieval._sparse import SparseIndex


def _unit_vectors(n: int, d: int = 32, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_index_type_follows_the_collection_size() -> None:
    hnsw = RetrievalSettings(flat_max_vectors=1000)
    assert choose_index_type(0, hnsw) == "IndexFlatIP"
    assert choose_index_type(999, hnsw) == "IndexFlatIP"
    assert choose_index_type(1000, hnsw) == "IndexHNSWFlat"
    ivf = RetrievalSettings(flat_max_vectors=1000, large_index="ivfpq")
    assert choose_index_type(50_000, ivf) == "IndexIVFPQ"
    # Too few points to train 256 PQ centroids per sub-quantizer: HNSW instead.
    assert choose_index_type(2_000, ivf) == "IndexHNSWFlat"
    assert choose_index_type(10**9, RetrievalSettings()) == "IndexHNSWFlat"


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (RetrievalSettings(), "IndexFlatIP"),
        (RetrievalSettings(flat_max_vectors=100), "IndexHNSWFlat"),
        (
            RetrievalSettings(
                flat_max_vectors=100, large_index="ivfpq", pq_subquantizers=2, ivf_nlist=16
            ),
            "IndexIVFPQ",
        ),
    ],
)
def test_each_index_type_finds_the_query_vector_itself(
    settings: RetrievalSettings, expected: str
) -> None:
    # IVF-PQ needs ~10k points to train; small vectors keep that quick.
    ivfpq = expected == "IndexIVFPQ"
    vectors = _unit_vectors(10_000, d=8) if ivfpq else _unit_vectors(600)
    ids = [f"e{i}" for i in range(len(vectors))]
    dense = DenseIndex(vectors.shape[1], settings)
    dense.build(ids, ["question"] * len(ids), vectors)
    assert dense.index_type == expected
    assert dense.on_gpu == (gpu_count() > 0 and expected != "IndexHNSWFlat")
    results = dense.search(vectors[[5, 77]], depth=10)
    top = [r[0].entry_id for r in results]
    if ivfpq:  # lossy codes: the vector itself must be among the first few
        assert all(
            f"e{i}" in [m.entry_id for m in r[:5]] for i, r in zip((5, 77), results, strict=True)
        )
    else:
        assert top == ["e5", "e77"]
    assert all(len(r) == 10 for r in results)


def test_dense_keeps_the_best_unit_per_entry_and_skips_tombstones() -> None:
    vectors = _unit_vectors(6)
    dense = DenseIndex(vectors.shape[1], RetrievalSettings())
    dense.build(["a", "a", "b", "c", "c", "c"], ["q", "c0", "q", "q", "c0", "c1"], vectors)
    (hits,) = dense.search(vectors[[4]], depth=10)
    assert hits[0].entry_id == "c"
    assert hits[0].unit_id == "c0"
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert sorted(h.entry_id for h in hits) == ["a", "b", "c"]
    assert dense.remove("c")
    assert not dense.remove("c")
    (hits,) = dense.search(vectors[[4]], depth=10)
    assert [h.entry_id for h in hits if h.entry_id == "c"] == []
    assert dense.entry_count == 2
    assert (dense.live_rows, dense.dead_rows) == (3, 3)
    assert dense.needs_rebuild()  # half the rows are dead


def test_dense_grows_out_of_flat_when_it_crosses_the_threshold() -> None:
    settings = RetrievalSettings(flat_max_vectors=50)
    vectors = _unit_vectors(60)
    dense = DenseIndex(vectors.shape[1], settings)
    dense.build([f"e{i}" for i in range(40)], ["q"] * 40, vectors[:40])
    assert dense.index_type == "IndexFlatIP"
    assert not dense.needs_rebuild()
    for i in range(40, 60):
        dense.add(f"e{i}", ["q"], vectors[i : i + 1])
    assert dense.needs_rebuild()


def test_dense_snapshot_round_trips(tmp_path: Path) -> None:
    vectors = _unit_vectors(30)
    dense = DenseIndex(vectors.shape[1], RetrievalSettings())
    dense.build([f"e{i}" for i in range(30)], ["q"] * 30, vectors)
    dense.remove("e3")
    dense.save(tmp_path)
    loaded = DenseIndex.load(tmp_path, RetrievalSettings())
    assert loaded.index_type == dense.index_type
    assert (loaded.entry_count, loaded.dead_rows) == (29, 1)
    assert loaded.search(vectors[:5], 5) == dense.search(vectors[:5], 5)


def test_sparse_ranks_by_bm25_masks_deletes_and_needs_a_refresh_after_adds(
    tmp_path: Path,
) -> None:
    sparse = SparseIndex(RetrievalSettings())
    sparse.build(
        ["flu", "flu", "covid", "masks"],
        ["question", "chunk-0", "question", "question"],
        [
            "What is influenza?",
            "Influenza is a seasonal virus infection.",
            "How does the coronavirus spread between people?",
            "Should people wear masks?",
        ],
    )
    (hits,) = sparse.search(["influenza viruses"], depth=10)
    assert [h.entry_id for h in hits] == ["flu"]  # once per entry, best unit
    assert hits[0].score > 0
    assert sparse.search(["the of and"], depth=10) == [[]]  # stopwords only: nothing
    assert sparse.search(["zebra"], depth=10) == [[]]  # unknown word: nothing
    sparse.remove("flu")
    assert sparse.search(["influenza"], depth=10) == [[]]
    sparse.add("zoo", ["question"], ["Can a zebra catch the virus?"])
    assert sparse.stale
    with pytest.raises(RuntimeError, match="refresh"):
        sparse.search(["zebra"], depth=10)
    sparse.refresh()
    assert [h.entry_id for h in sparse.search(["zebras"], depth=10)[0]] == ["zoo"]
    sparse.save(tmp_path)
    loaded = SparseIndex.load(tmp_path, RetrievalSettings())
    assert loaded.search(["people virus"], 5) == sparse.search(["people virus"], 5)
    assert loaded.rows == 3  # the deleted rows were dropped


def test_searchable_terms_are_bm25s_tokenize_terms() -> None:
    import json

    import bm25s
    import Stemmer
    from tribunal.retrieval._sparse import searchable_terms

    from tests.conftest import SHARED

    rows = [
        json.loads(line)
        for line in (SHARED / "data" / "covid-qa" / "faq_kb_en.jsonl").read_text().splitlines()
        if line.strip()
    ]
    texts = [r["question"] for r in rows] + [r["answer"] for r in rows]
    texts += ["the", "", "🦠 !!", "COVID-19's R0 = 2.5; Ärzte & ÉCOLES", "a an I x9 Z"]
    expected = bm25s.tokenize(
        texts,
        stopwords="en",
        stemmer=Stemmer.Stemmer("english"),
        return_ids=False,
        show_progress=False,
    )
    assert searchable_terms(texts) == expected
    assert searchable_terms([]) == []
