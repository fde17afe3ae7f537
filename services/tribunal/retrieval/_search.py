"""A knowledge base's search pipeline: embed the queries (one batch per model) → dense
and sparse candidate lists per collection (FAISS and BM25 batched over the queries) →
reciprocal rank fusion → optional rerank of the head → the top_k hits with their
entries and each entry's stored verification."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from ..core import RetrievalSettings, check_deadline, python_turn
from ..embedding import Embedder
from ._collection import Collection
from ._ranked import RankedUnits
from ._ranking import Candidate, fuse, rerank, uses_dense, uses_sparse
from ._rerank import Reranker
from ._retrieval_models import RetrievalModels
from ._store import RetrievalModelChangedError
from ._types import SearchHit, SearchQuery, SearchResult

__all__ = ["QueryVectors", "SearchedKnowledgeBase", "run_searches"]


class SearchedKnowledgeBase(Protocol):
    """What the pipeline reads of a knowledge base (:class:`KnowledgeBase`)."""

    settings: RetrievalSettings
    reranker: Reranker | None
    models: RetrievalModels

    def collection(self, name: str, *, create: bool = False) -> Collection: ...

    def embed_queries(
        self,
        texts: Sequence[str],
        embedder: Embedder | None = None,
        collections: Sequence[str] = (),
    ) -> NDArray[np.float32]: ...


@dataclass(frozen=True)
class QueryVectors:
    """The dense queries' vectors by position in the batch, and the embedder of each."""

    vectors: dict[int, NDArray[np.float32]]
    embedders: dict[int, Embedder]


def run_searches(
    kb: SearchedKnowledgeBase, queries: Sequence[SearchQuery], given: QueryVectors | None
) -> list[SearchResult]:
    """The searches (already validated), in request order; ``given``: vectors computed
    elsewhere, else each query is embedded with its collection's model."""
    stages: list[dict[str, float]] = [{} for _ in queries]
    # Each collection looked up once per batch: the lookup checks the store for a change
    # of model, which every later step would otherwise repeat.
    opened = {name: kb.collection(name) for name in dict.fromkeys(q.collection for q in queries)}
    embedded = given if given is not None else _embed(kb, opened, queries, stages)
    check_deadline("the search")
    for collection in opened.values():
        # Changes replayed (an index rebuilt, a snapshot written) before the turn: the
        # turn's searches then only read.
        collection.catch_up()
    with python_turn():
        dense_lists = _retrieve(kb, opened, queries, embedded, stages, dense=True)
        sparse_lists = _retrieve(kb, opened, queries, embedded, stages, dense=False)
    return [
        _finish(
            kb,
            opened[query.collection],
            query,
            (dense_lists[i], sparse_lists[i]),
            stages[i],
            embedder=embedded.embedders.get(i),
        )
        for i, query in enumerate(queries)
    ]


def _embed(
    kb: SearchedKnowledgeBase,
    opened: dict[str, Collection],
    queries: Sequence[SearchQuery],
    stages: list[dict[str, float]],
) -> QueryVectors:
    """One batch per model: collections searched with one model share it."""
    groups: dict[int, tuple[Embedder, list[int]]] = {}
    for i, query in enumerate(queries):
        if uses_dense(query):
            embedder = opened[query.collection].embedder
            groups.setdefault(id(embedder), (embedder, []))[1].append(i)
    vectors: dict[int, NDArray[np.float32]] = {}
    embedders: dict[int, Embedder] = {}
    for embedder, positions in groups.values():
        started = time.perf_counter()
        embedded = kb.embed_queries(
            [queries[i].text for i in positions],
            embedder,
            [queries[i].collection for i in positions],
        )
        elapsed = (time.perf_counter() - started) * 1000
        for i, row in zip(positions, embedded, strict=True):
            vectors[i], embedders[i] = row, embedder
            stages[i]["embed"] = elapsed
    return QueryVectors(vectors, embedders)


def _depth(kb: SearchedKnowledgeBase, query: SearchQuery) -> int:
    depth = max(kb.settings.candidate_depth, query.top_k)
    return max(depth, kb.settings.rerank_head) if query.rerank else depth


def _retrieve(
    kb: SearchedKnowledgeBase,
    opened: dict[str, Collection],
    queries: Sequence[SearchQuery],
    embedded: QueryVectors,
    stages: list[dict[str, float]],
    *,
    dense: bool,
) -> list[RankedUnits | None]:
    """Candidate lists of one retriever, batched per collection; None where unused."""
    out: list[RankedUnits | None] = [None] * len(queries)
    by_collection: dict[str, list[int]] = {}
    for i, query in enumerate(queries):
        if uses_dense(query) if dense else uses_sparse(query):
            by_collection.setdefault(query.collection, []).append(i)
    for name, positions in by_collection.items():
        collection = opened[name]
        depth = max(_depth(kb, queries[i]) for i in positions)
        # Only calibration leaves a query's own phrasing out: served searches skip nothing.
        skip = (
            [
                collection.added_phrasings_of(queries[i].text)
                if queries[i].leave_out_own_phrasing
                else frozenset()
                for i in positions
            ]
            if any(queries[i].leave_out_own_phrasing for i in positions)
            else []
        )
        started = time.perf_counter()
        if dense:
            if collection.model_changed() or any(
                embedded.embedders[i] is not collection.embedder for i in positions
            ):
                # Re-embedded by another process between embedding and searching.
                raise RetrievalModelChangedError(
                    f"collection {name!r} was re-embedded by another process during the "
                    "search; retry"
                )
            vectors = np.stack([embedded.vectors[i] for i in positions])
            lists = collection.search_dense(vectors, depth, skip)
        else:
            lists = collection.search_sparse([queries[i].text for i in positions], depth, skip)
        elapsed = (time.perf_counter() - started) * 1000
        for i, matches in zip(positions, lists, strict=True):
            out[i] = matches[: _depth(kb, queries[i])]
            stages[i]["dense" if dense else "sparse"] = elapsed
    return out


def _vote(candidate: Candidate) -> float:
    """A candidate's neighbour vote: 0 when none of the query's nearest units is its own."""
    match = candidate.dense
    return match.vote if match is not None and match.vote is not None else 0.0


def _finish(
    kb: SearchedKnowledgeBase,
    collection: Collection,
    query: SearchQuery,
    lists: tuple[RankedUnits | None, RankedUnits | None],
    stages: dict[str, float],
    *,
    embedder: Embedder | None,
) -> SearchResult:
    """Fuse the (dense, sparse) lists, rerank, and read the hits' entries."""
    dense, sparse = lists
    started = time.perf_counter()
    head_size = max(query.top_k, kb.settings.rerank_head if query.rerank else 0)
    with python_turn():
        head = fuse(query, dense, sparse, rrf_k=kb.settings.rrf_k, limit=head_size)
        stages["fuse"] = (time.perf_counter() - started) * 1000
        kb_version, found, signed, signed_head = collection.served_entries(
            [c.entry_id for c in head]
        )
    entries = {entry_id: entry for entry_id, (entry, _) in found.items()}
    # An entry deleted by another process since the index saw it is left out.
    head = [c for c in head if c.entry_id in entries]
    if query.rerank:
        started = time.perf_counter()
        assert kb.reranker is not None
        head = rerank(kb.reranker, query, head, entries, rerank_head=kb.settings.rerank_head)
        stages["rerank"] = (time.perf_counter() - started) * 1000
    hits = tuple(
        SearchHit(
            entry=entries[c.entry_id],
            score=c.score if c.rerank is None else c.rerank,
            rank=rank,
            matched_unit_id=c.matched_unit(),
            dense_score=c.dense.score if c.dense else None,
            dense_rank=c.dense_rank,
            sparse_score=c.sparse.score if c.sparse else None,
            sparse_rank=c.sparse_rank,
            rerank_score=c.rerank,
            neighbour_vote=_vote(c) if dense is not None else None,
            verification=found[c.entry_id][1],
            served=signed.get(c.entry_id),
        )
        for rank, c in enumerate(head[: query.top_k], start=1)
    )
    return SearchResult(
        hits=hits,
        stage_milliseconds=stages,
        kb_version=kb_version,
        kb_content_version=collection.content_version(),
        signed_head=signed_head,
        # The model whose vectors were compared (a sparse-only search: the collection's).
        retrieval_model=kb.models.reported(embedder or collection.embedder),
    )
