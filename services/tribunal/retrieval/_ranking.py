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
) -> list[Candidate]:
    """The candidates of one query: fused by reciprocal rank (hybrid) or one retriever's
    list, each with its place in both lists."""
    by_id: dict[str, Candidate] = {}
    if query.mode is SearchMode.HYBRID:
        rankings = [[m.entry_id for m in dense or []], [m.entry_id for m in sparse or []]]
        for entry_id, score in reciprocal_rank_fusion(rankings, k=rrf_k):
            by_id[entry_id] = Candidate(entry_id, score)
    else:
        single = dense if query.mode is SearchMode.DENSE else sparse
        for match in single or []:
            by_id[match.entry_id] = Candidate(match.entry_id, match.score)
    for rank, match in enumerate(dense or [], start=1):
        if match.entry_id in by_id:
            by_id[match.entry_id].dense, by_id[match.entry_id].dense_rank = match, rank
    for rank, match in enumerate(sparse or [], start=1):
        if match.entry_id in by_id:
            by_id[match.entry_id].sparse, by_id[match.entry_id].sparse_rank = match, rank
    return list(by_id.values())


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
