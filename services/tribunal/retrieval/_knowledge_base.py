"""The retrieval service's domain object: named collections and the search pipeline.

A search runs: validate → embed the queries (one batch) → dense and sparse
candidate lists per collection (FAISS and BM25 batched over the queries) →
reciprocal rank fusion → optional rerank of the head → the top_k hits with
their entries. Transports (gRPC, Ray Serve) call this and only translate.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ..core import (
    FailedPreconditionError,
    InternalError,
    NotFoundError,
    RetrievalSettings,
)
from ._collection import Collection
from ._dense import UnitMatch
from ._embedding import Embedder, load_profile_embedder
from ._fusion import reciprocal_rank_fusion
from ._rerank import Reranker, rerank_order, rerank_passage
from ._types import (
    CollectionStats,
    DeleteResult,
    KbEntry,
    SearchHit,
    SearchMode,
    SearchQuery,
    SearchResult,
    UpsertResult,
)
from ._validation import (
    check_batch,
    check_collection_name,
    check_delete_ids,
    check_entries,
    check_query,
)

if TYPE_CHECKING:
    from ..core import Settings

__all__ = ["KnowledgeBase"]


def _uses_dense(query: SearchQuery) -> bool:
    return query.mode in (SearchMode.HYBRID, SearchMode.DENSE)


def _uses_sparse(query: SearchQuery) -> bool:
    return query.mode in (SearchMode.HYBRID, SearchMode.SPARSE)


class _Candidate:
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


class KnowledgeBase:
    """Collections under one root folder, searchable by hybrid retrieval.

    Args:
        root: Folder holding one sub-folder per collection.
        embedder: The profile's embedder.
        settings: Limits and retrieval knobs.
        reranker: Optional model for ``rerank=True`` searches.
    """

    def __init__(
        self,
        root: Path,
        embedder: Embedder,
        settings: RetrievalSettings,
        reranker: Reranker | None = None,
    ) -> None:
        self.root = root
        self.embedder = embedder
        self.settings = settings
        self.reranker = reranker
        self._collections: dict[str, Collection] = {}
        self._lock = threading.Lock()
        root.mkdir(parents=True, exist_ok=True)
        for folder in sorted(root.iterdir()):
            if (folder / "entries.sqlite3").is_file():
                self._collections[folder.name] = Collection(folder.name, folder, embedder, settings)

    @classmethod
    def from_settings(cls, settings: Settings, reranker: Reranker | None = None) -> KnowledgeBase:
        """Load the profile's embedder and open every collection in ``data_dir/retrieval``."""
        return cls(
            settings.data_dir / "retrieval",
            load_profile_embedder(settings),
            settings.retrieval,
            reranker,
        )

    # -- collections -----------------------------------------------------------------
    def collection_names(self) -> list[str]:
        """Open collections and those on disk (created by another process)."""
        on_disk = {p.parent.name for p in self.root.glob("*/entries.sqlite3")}
        with self._lock:
            return sorted(set(self._collections) | on_disk)

    def collection(self, name: str, *, create: bool = False) -> Collection:
        """The named collection; NOT_FOUND unless it exists or ``create``."""
        check_collection_name(name)
        with self._lock:
            found = self._collections.get(name)
            # Also open one that another process (the CLI, a replica) created since.
            on_disk = (self.root / name / "entries.sqlite3").is_file()
            if found is None and (create or on_disk):
                found = Collection(name, self.root / name, self.embedder, self.settings)
                self._collections[name] = found
        if found is None:
            known = ", ".join(sorted(self._collections)) or "none"
            raise NotFoundError(
                f"collection {name!r} does not exist (existing: {known}); create it with an "
                "Upsert that sets create_collection, or `tribunal kb ingest`",
                field="collection",
            )
        return found

    # -- writes ---------------------------------------------------------------------
    def upsert(
        self,
        collection: str,
        entries: Sequence[KbEntry],
        *,
        create: bool = False,
        progress: bool = False,
    ) -> UpsertResult:
        """Insert or replace entries; durable and searchable when this returns."""
        check_collection_name(collection)
        check_entries(entries, self.settings)
        return self.collection(collection, create=create).upsert(entries, progress=progress)

    def delete(self, collection: str, ids: Sequence[str]) -> DeleteResult:
        """Remove entries; durable and gone from searches when this returns."""
        check_delete_ids(ids)
        return self.collection(collection).delete(ids)

    # -- reads ----------------------------------------------------------------------
    def stats(self, collection: str = "") -> list[CollectionStats]:
        """One collection's statistics, or every collection's when ``collection`` is empty."""
        names = [collection] if collection else self.collection_names()
        return [self.collection(name).stats() for name in names]

    def embed_queries(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Query vectors (one batch); the Ray deployment batches across requests with it."""
        return self.embedder.embed(texts)

    def validate(self, query: SearchQuery) -> None:
        """Check one query before any work (raises the caller-facing error)."""
        check_query(query, self.settings)
        if query.rerank and self.reranker is None:
            raise FailedPreconditionError(
                "this service has no reranker; search with rerank=false", field="rerank"
            )
        self.collection(query.collection)

    def search(self, query: SearchQuery) -> SearchResult:
        """One search; see :meth:`search_batch`."""
        self.validate(query)
        return self._run([query], None)[0]

    def search_batch(
        self,
        queries: Sequence[SearchQuery],
        *,
        query_vectors: NDArray[np.float32] | None = None,
    ) -> list[SearchResult]:
        """Many searches, embedded together; results in request order.

        Args:
            queries: The searches (any mix of collections and modes).
            query_vectors: Already-computed query embeddings, one row per query
                (rows of sparse-only queries are ignored); embedded here when None.
        """
        check_batch(queries, self.settings)
        for query in queries:
            self.validate(query)
        if query_vectors is not None and query_vectors.shape != (
            len(queries),
            self.embedder.dimension,
        ):
            raise InternalError(f"query_vectors has shape {query_vectors.shape}")
        return self._run(queries, query_vectors)

    # -- the pipeline -----------------------------------------------------------------
    def _run(
        self, queries: Sequence[SearchQuery], vectors: NDArray[np.float32] | None
    ) -> list[SearchResult]:
        stages: list[dict[str, float]] = [{} for _ in queries]
        dense_positions = [i for i, q in enumerate(queries) if _uses_dense(q)]
        if dense_positions and vectors is None:
            started = time.perf_counter()
            embedded = self.embed_queries([queries[i].text for i in dense_positions])
            elapsed = (time.perf_counter() - started) * 1000
            vectors = np.zeros((len(queries), self.embedder.dimension), dtype=np.float32)
            vectors[dense_positions] = embedded
            for i in dense_positions:
                stages[i]["embed"] = elapsed
        dense_lists = self._retrieve(queries, vectors, stages, dense=True)
        sparse_lists = self._retrieve(queries, vectors, stages, dense=False)
        return [
            self._finish(query, dense_lists[i], sparse_lists[i], stages[i])
            for i, query in enumerate(queries)
        ]

    def _depth(self, query: SearchQuery) -> int:
        depth = max(self.settings.candidate_depth, query.top_k)
        return max(depth, self.settings.rerank_head) if query.rerank else depth

    def _retrieve(
        self,
        queries: Sequence[SearchQuery],
        vectors: NDArray[np.float32] | None,
        stages: list[dict[str, float]],
        *,
        dense: bool,
    ) -> list[list[UnitMatch] | None]:
        """Candidate lists of one retriever, batched per collection; None where unused."""
        out: list[list[UnitMatch] | None] = [None] * len(queries)
        by_collection: dict[str, list[int]] = {}
        for i, query in enumerate(queries):
            if _uses_dense(query) if dense else _uses_sparse(query):
                by_collection.setdefault(query.collection, []).append(i)
        for name, positions in by_collection.items():
            collection = self.collection(name)
            depth = max(self._depth(queries[i]) for i in positions)
            started = time.perf_counter()
            if dense:
                assert vectors is not None
                lists = collection.search_dense(vectors[positions], depth)
            else:
                lists = collection.search_sparse([queries[i].text for i in positions], depth)
            elapsed = (time.perf_counter() - started) * 1000
            for i, matches in zip(positions, lists, strict=True):
                out[i] = matches[: self._depth(queries[i])]
                stages[i]["dense" if dense else "sparse"] = elapsed
        return out

    def _finish(
        self,
        query: SearchQuery,
        dense: list[UnitMatch] | None,
        sparse: list[UnitMatch] | None,
        stages: dict[str, float],
    ) -> SearchResult:
        started = time.perf_counter()
        candidates = self._fuse(query, dense, sparse)
        stages["fuse"] = (time.perf_counter() - started) * 1000
        head_size = max(query.top_k, self.settings.rerank_head if query.rerank else 0)
        head = candidates[:head_size]
        entries = self.collection(query.collection).entries([c.entry_id for c in head])
        # An entry deleted by another process since the index saw it is left out.
        head = [c for c in head if c.entry_id in entries]
        if query.rerank:
            started = time.perf_counter()
            head = self._rerank(query, head, entries)
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
            )
            for rank, c in enumerate(head[: query.top_k], start=1)
        )
        return SearchResult(hits=hits, stage_milliseconds=stages)

    def _fuse(
        self,
        query: SearchQuery,
        dense: list[UnitMatch] | None,
        sparse: list[UnitMatch] | None,
    ) -> list[_Candidate]:
        by_id: dict[str, _Candidate] = {}
        if query.mode is SearchMode.HYBRID:
            rankings = [[m.entry_id for m in dense or []], [m.entry_id for m in sparse or []]]
            for entry_id, score in reciprocal_rank_fusion(rankings, k=self.settings.rrf_k):
                by_id[entry_id] = _Candidate(entry_id, score)
        else:
            single = dense if query.mode is SearchMode.DENSE else sparse
            for match in single or []:
                by_id[match.entry_id] = _Candidate(match.entry_id, match.score)
        for rank, match in enumerate(dense or [], start=1):
            if match.entry_id in by_id:
                by_id[match.entry_id].dense, by_id[match.entry_id].dense_rank = match, rank
        for rank, match in enumerate(sparse or [], start=1):
            if match.entry_id in by_id:
                by_id[match.entry_id].sparse, by_id[match.entry_id].sparse_rank = match, rank
        return list(by_id.values())

    def _rerank(
        self, query: SearchQuery, head: list[_Candidate], entries: dict[str, KbEntry]
    ) -> list[_Candidate]:
        assert self.reranker is not None
        reranked = head[: self.settings.rerank_head]
        passages = [rerank_passage(entries[c.entry_id], c.matched_unit()) for c in reranked]
        scores = self.reranker.score(query.text, passages) if passages else []
        if len(scores) != len(passages):
            raise InternalError(
                f"reranker {self.reranker.name} returned {len(scores)} scores "
                f"for {len(passages)} passages"
            )
        for candidate, score in zip(reranked, scores, strict=True):
            candidate.rerank = float(score)
        # The rest of the head keeps its fused order below the reranked part.
        return [reranked[i] for i in rerank_order(scores)] + head[len(reranked) :]

    def snapshot(self) -> None:
        """Snapshot every collection's indexes."""
        for name in self.collection_names():
            self.collection(name).snapshot()

    def close(self) -> None:
        """Snapshot and close every collection."""
        with self._lock:
            collections, self._collections = list(self._collections.values()), {}
        for collection in collections:
            collection.close()
