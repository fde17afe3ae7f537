"""One query's candidates: which retrievers it uses, fusion, reranking of the head."""

from __future__ import annotations

from ..core import InternalError
from ..kb import KbEntry
from ._dense import UnitMatch
from ._fusion import reciprocal_rank_fusion
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
    dense: list[UnitMatch] | None,
    sparse: list[UnitMatch] | None,
    *,
    rrf_k: int,
    limit: int | None = None,
) -> list[Candidate]:
    """The candidates of one query, the first ``limit`` of them (None: all): fused by
    reciprocal rank (hybrid) or one retriever's list, each with its place in both lists."""
    ranked: list[tuple[str, float]]
    if query.mode is SearchMode.HYBRID:
        rankings = [[m.entry_id for m in dense or []], [m.entry_id for m in sparse or []]]
        ranked = reciprocal_rank_fusion(rankings, k=rrf_k)
    else:
        single = dense if query.mode is SearchMode.DENSE else sparse
        ranked = [(match.entry_id, match.score) for match in single or []]
    # Only the kept candidates are built: a search keeps its head of a few, out of the
    # hundreds the two lists fuse into.
    candidates = [Candidate(entry_id, score) for entry_id, score in ranked[:limit]]
    kept = {candidate.entry_id: candidate for candidate in candidates}
    for rank, match in enumerate(dense or [], start=1):
        candidate = kept.get(match.entry_id)
        if candidate is not None:
            candidate.dense, candidate.dense_rank = match, rank
    for rank, match in enumerate(sparse or [], start=1):
        candidate = kept.get(match.entry_id)
        if candidate is not None:
            candidate.sparse, candidate.sparse_rank = match, rank
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
