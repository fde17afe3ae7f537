"""One query's candidates: which retrievers it uses, fusion, reranking of the head."""

from __future__ import annotations

from ..core import InternalError
from ..kb import KbEntry
from ._fusion import reciprocal_rank_fusion
from ._ranked import RankedUnits, UnitMatch
from ._rerank import Reranker, rerank_order, rerank_passage
from ._types import SearchMode, SearchQuery

__all__ = ["Candidate", "fuse", "rerank", "uses_dense", "uses_sparse"]


def uses_dense(query: SearchQuery) -> bool:
    return query.mode in (SearchMode.HYBRID, SearchMode.DENSE)


def uses_sparse(query: SearchQuery) -> bool:
    return query.mode in (SearchMode.HYBRID, SearchMode.SPARSE)


class Candidate:
    """One entry on its way through fusion and reranking."""

    __slots__ = ("dense", "dense_rank", "entry_id", "rerank", "score", "sparse", "sparse_rank")

    def __init__(self, entry_id: str, score: float) -> None:
        self.entry_id = entry_id
        self.score = score
        self.dense: UnitMatch | None = None
        self.dense_rank: int | None = None
        self.sparse: UnitMatch | None = None
        self.sparse_rank: int | None = None
        self.rerank: float | None = None

    def matched_unit(self) -> str:
        # The unit of whichever retriever ranked the entry higher (dense on ties).
        if self.dense is not None and (
            self.sparse is None or (self.dense_rank or 0) <= (self.sparse_rank or 0)
        ):
            return self.dense.unit_id
        assert self.sparse is not None
        return self.sparse.unit_id


def fuse(
    query: SearchQuery,
    dense: RankedUnits | None,
    sparse: RankedUnits | None,
    *,
    rrf_k: int,
    limit: int | None = None,
) -> list[Candidate]:
    """The candidates of one query, the first ``limit`` of them (None: all): fused by
    reciprocal rank (hybrid) or one retriever's list, each with its place in both lists."""
    ranked: list[tuple[str, float]]
    if query.mode is SearchMode.HYBRID:
        rankings = [dense.entry_ids if dense else [], sparse.entry_ids if sparse else []]
        ranked = reciprocal_rank_fusion(rankings, k=rrf_k, limit=limit)
    else:
        single = dense if query.mode is SearchMode.DENSE else sparse
        kept = single[:limit] if single is not None else None
        ranked = list(zip(kept.entry_ids, kept.scores, strict=True)) if kept else []
    # Only the kept candidates are built, and their matches read: a search keeps its head
    # of a few, out of the hundreds the two lists fuse into.
    candidates = [Candidate(entry_id, score) for entry_id, score in ranked]
    for matches, is_dense in ((dense, True), (sparse, False)):
        if not matches:
            continue
        place = matches.position()
        for candidate in candidates:
            at = place.get(candidate.entry_id)
            if at is None:
                continue
            if is_dense:
                candidate.dense, candidate.dense_rank = matches[at], at + 1
            else:
                candidate.sparse, candidate.sparse_rank = matches[at], at + 1
    return candidates


def rerank(
    reranker: Reranker,
    query: SearchQuery,
    head: list[Candidate],
    entries: dict[str, KbEntry],
    *,
    rerank_head: int,
) -> list[Candidate]:
    """The first ``rerank_head`` candidates in the reranker's order, the rest after them."""
    reranked = head[:rerank_head]
    passages = [rerank_passage(entries[c.entry_id], c.matched_unit()) for c in reranked]
    scores = reranker.score(query.text, passages) if passages else []
    if len(scores) != len(passages):
        raise InternalError(
            f"reranker {reranker.name} returned {len(scores)} scores for {len(passages)} passages"
        )
    for candidate, score in zip(reranked, scores, strict=True):
        candidate.rerank = float(score)
    # The rest of the head keeps its fused order below the reranked part.
    return [reranked[i] for i in rerank_order(scores)] + head[len(reranked) :]
