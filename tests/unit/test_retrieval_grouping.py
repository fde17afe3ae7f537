"""Each retriever's list is grouped by entry with array operations; these tests hold it to
the plain walk row by row, best first, that defines it (written out below), on random
indexes with several units per entry, tombstones, skipped units and FAISS's -1 padding."""

from __future__ import annotations

import numpy as np
import pytest
from tribunal.core import RetrievalSettings
from tribunal.retrieval import DenseIndex
from tribunal.retrieval._dense import group_best_per_entry, neighbour_votes
from tribunal.retrieval._fusion import reciprocal_rank_fusion
from tribunal.retrieval._ranked import RankedUnits, UnitMatch
from tribunal.retrieval._ranking import fuse
from tribunal.retrieval._sparse import SparseIndex
from tribunal.retrieval._types import SearchMode, SearchQuery


def walked(  # noqa: PLR0917 - the walk's inputs, as group_best_per_entry takes them
    scores: list[float],
    rows: list[int],
    row_entry: list[str],
    row_unit: list[str],
    live: list[bool],
    depth: int,
    neighbours: int,
    skip: frozenset[tuple[str, str]],
) -> list[UnitMatch]:
    """The definition: each live, unskipped entry's first row, best first; votes over the
    first ``neighbours`` live, unskipped rows."""
    kept = [
        (score, row)
        for score, row in zip(scores, rows, strict=True)
        if row >= 0 and live[row] and (row_entry[row], row_unit[row]) not in skip
    ]
    votes = neighbour_votes(
        [s for s, _ in kept[:neighbours]],
        [row_entry[r] for _, r in kept[:neighbours]],
        temperature=0.05,
    )
    out: list[UnitMatch] = []
    seen: set[str] = set()
    for score, row in kept:
        entry_id = row_entry[row]
        if entry_id in seen or len(out) >= depth:
            continue
        seen.add(entry_id)
        vote = votes.get(entry_id, 0.0) if neighbours > 0 else None
        out.append(UnitMatch(entry_id, row_unit[row], score, vote))
    return out


@pytest.mark.parametrize("seed", range(12))
def test_grouping_equals_the_walk_row_by_row(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_rows = int(rng.integers(1, 300))
    row_entry = [f"e{int(rng.integers(0, max(1, n_rows // 3)))}" for _ in range(n_rows)]
    row_unit = [f"u{i}" for i in range(n_rows)]
    live = rng.random(n_rows) > 0.2
    returned = int(rng.integers(1, n_rows + 5))  # more than the index holds: -1 padding
    order = rng.permutation(n_rows)[:returned]
    rows = np.full(returned, -1, dtype=np.int64)
    rows[: len(order)] = order
    scores = np.sort(rng.random(returned).astype(np.float32))[::-1].copy()
    skip = frozenset(
        (row_entry[r], row_unit[r]) for r in rng.choice(n_rows, size=n_rows // 10, replace=False)
    )
    for depth in (1, 5, 100):
        for neighbours in (0, 10):
            for skipped in (frozenset(), skip):
                got = group_best_per_entry(
                    scores,
                    rows=rows,
                    row_entry=row_entry,
                    row_unit=row_unit,
                    live=live,
                    depth=depth,
                    neighbours=neighbours,
                    skip=skipped,
                )
                expected = walked(
                    scores.tolist(),
                    rows.tolist(),
                    row_entry,
                    row_unit,
                    live.tolist(),
                    depth,
                    neighbours,
                    skipped,
                )
                assert list(got) == expected


def test_the_dense_index_groups_like_the_walk_after_removals() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(120, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owners = [f"e{i % 30}" for i in range(120)]
    settings = RetrievalSettings(vote_neighbours=10)
    dense = DenseIndex(8, settings)
    dense.build(owners, [f"u{i}" for i in range(120)], vectors)
    dense.remove("e4")
    dense.add("e4", ["u-new"], vectors[:1])
    query = vectors[[7]]
    (got,) = dense.search(query, depth=12)
    cosines = (np.vstack([vectors, vectors[:1]]) @ query.ravel()).astype(np.float32)
    order = np.argsort(-cosines, kind="stable")
    entry = [*owners, "e4"]
    unit = [f"u{i}" for i in range(120)] + ["u-new"]
    live = [owner != "e4" for owner in owners] + [True]
    expected = walked(
        cosines[order].tolist(), order.tolist(), entry, unit, live, 12, 10, frozenset()
    )
    assert [(m.entry_id, m.unit_id) for m in got] == [(m.entry_id, m.unit_id) for m in expected]
    assert [m.score for m in got] == pytest.approx([m.score for m in expected], abs=1e-5)
    assert [m.vote for m in got] == pytest.approx([m.vote for m in expected], abs=1e-4)


def test_the_sparse_index_keeps_each_entrys_best_unit_like_the_walk() -> None:
    sparse = SparseIndex(RetrievalSettings())
    texts = {
        ("a", "q"): "mask wearing outdoors",
        ("a", "q:1"): "should I wear a mask outside",
        ("b", "q"): "hand washing and soap",
        ("b", "answer"): "wash hands with soap, wear a mask in shops",
        ("c", "q"): "mask mask mask",
        ("d", "q"): "vaccines for children",
    }
    for (entry_id, unit), text in texts.items():
        sparse.add(entry_id, [unit], [text])
    sparse.remove("d")
    sparse.refresh()
    query = "wear a mask"
    scores = sparse._retriever.get_scores(
        sparse._retriever.get_tokens_ids(sparse.tokenize([query])[0])
    )
    order = [int(r) for r in np.argsort(-scores, kind="stable") if scores[r] > 0]
    for skip in (frozenset(), frozenset({("a", "q:1")})):
        expected = walked(
            [float(scores[r]) for r in order],
            order,
            sparse._row_entry,
            sparse._row_unit,
            [True] * sparse.rows,
            10,
            0,
            skip,
        )
        (got,) = sparse.search([query], 10, [skip])
        assert list(got) == expected
        assert len({m.entry_id for m in got}) == len(got) == 3
    (shallow,) = sparse.search([query], 2)
    assert shallow == sparse.search([query], 10)[0][:2]


def _reference_rrf(rankings: list[list[str]], k: int) -> list[tuple[str, float]]:
    scores: dict[str, float] = {}
    first: dict[str, tuple[int, int]] = {}
    for list_index, ranking in enumerate(rankings):
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
            first[item] = min(first.get(item, (rank, list_index)), (rank, list_index))
    return sorted(scores.items(), key=lambda pair: (-pair[1], first[pair[0]]))


@pytest.mark.parametrize("seed", range(8))
def test_fusion_and_its_head_equal_the_full_fusion_cut(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pool = [f"e{i}" for i in range(60)]
    dense = RankedUnits.of(
        UnitMatch(e, "q", float(s), float(v))
        for e, s, v in zip(
            rng.permutation(pool)[: rng.integers(0, 50)],
            rng.random(60),
            rng.random(60),
            strict=False,
        )
    )
    sparse = RankedUnits.of(
        UnitMatch(e, "answer", float(s))
        for e, s in zip(rng.permutation(pool)[: rng.integers(0, 50)], rng.random(60), strict=False)
    )
    rankings = [[m.entry_id for m in dense], [m.entry_id for m in sparse]]
    assert reciprocal_rank_fusion(rankings, k=60) == _reference_rrf(rankings, 60)
    for mode in SearchMode.HYBRID, SearchMode.DENSE, SearchMode.SPARSE:
        query = SearchQuery("c", "q", 5, mode)
        full = fuse(query, dense, sparse, rrf_k=60)
        for limit in (1, 5, 200):
            head = fuse(query, dense, sparse, rrf_k=60, limit=limit)
            assert [
                (c.entry_id, c.score, c.dense, c.dense_rank, c.sparse, c.sparse_rank) for c in head
            ] == [
                (c.entry_id, c.score, c.dense, c.dense_rank, c.sparse, c.sparse_rank)
                for c in full[:limit]
            ]
            # Each candidate carries its own match and 1-based place in either list.
            for c in head:
                for matches, match, rank in (
                    (dense, c.dense, c.dense_rank),
                    (sparse, c.sparse, c.sparse_rank),
                ):
                    listed = [m.entry_id for m in matches]
                    if c.entry_id in listed:
                        assert rank == listed.index(c.entry_id) + 1
                        assert match == list(matches)[listed.index(c.entry_id)]
                    else:
                        assert (match, rank) == (None, None)


@pytest.mark.parametrize("seed", range(10))
def test_fusion_of_any_number_of_lists_equals_the_running_sum(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    pool = [f"e{i}" for i in range(int(rng.integers(1, 40)))]
    # Short lists over a small pool: many equal sums, so the tie rule decides.
    rankings = [
        [str(e) for e in rng.permutation(pool)[: rng.integers(0, len(pool) + 1)]]
        for _ in range(int(rng.integers(1, 5)))
    ]
    k = int(rng.integers(1, 80))
    expected = _reference_rrf(rankings, k)
    assert reciprocal_rank_fusion(rankings, k=k) == expected
    for limit in (0, 1, 3, len(expected) + 2):
        assert reciprocal_rank_fusion(rankings, k=k, limit=limit) == expected[:limit]


def test_a_ranked_list_reads_like_its_matches() -> None:
    matches = [UnitMatch("a", "q", 0.9, 0.7), UnitMatch("b", "q:1", 0.5, 0.3)]
    ranked = RankedUnits.of(matches)
    assert list(ranked) == matches
    assert ranked == matches  # it stands where lists of matches stood
    assert ranked[1] == matches[1]
    assert len(ranked) == 2
    assert list(ranked[:1]) == matches[:1]
    assert ranked.position() == {"a": 0, "b": 1}
    assert RankedUnits.of(m._replace(vote=None) for m in matches).votes is None
    assert ranked == RankedUnits.of(matches)
    assert ranked != RankedUnits.of(matches[:1])
    with pytest.raises(ValueError, match="same length"):
        RankedUnits(["a"], [], [0.1])
