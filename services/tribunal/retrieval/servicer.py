"""gRPC adapter of the retrieval service: ``tribunal.v1.RetrievalService``.

Each method is three small steps: translate the request into domain values
(rejecting what cannot be translated), run the :class:`KnowledgeBase`, build
the response. Errors are Tribunal errors; the runtime's interceptor maps
them to status codes (INVALID_ARGUMENT, NOT_FOUND, ...).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import grpc

from ..core import (
    InvalidArgumentError,
    Settings,
    UnavailableError,
)
from ..core.server import ServiceBinding, ServiceHost
from ..v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc
from ._knowledge_base import KnowledgeBase
from ._rerank import LazyReranker, Reranker, load_profile_reranker
from ._types import (
    Chunk,
    CollectionStats,
    KbEntry,
    SearchMode,
    SearchQuery,
    SearchResult,
)

__all__ = [
    "RetrievalServicer",
    "build_host",
    "entry_from_proto",
    "entry_to_proto",
    "profile_reranker",
    "query_from_proto",
    "result_to_proto",
]

log = logging.getLogger(__name__)

SERVICE_NAME = "tribunal.v1.RetrievalService"

_MODES = {
    retrieval_pb2.SEARCH_MODE_UNSPECIFIED: SearchMode.HYBRID,
    retrieval_pb2.SEARCH_MODE_HYBRID: SearchMode.HYBRID,
    retrieval_pb2.SEARCH_MODE_DENSE: SearchMode.DENSE,
    retrieval_pb2.SEARCH_MODE_SPARSE: SearchMode.SPARSE,
}


# -- proto ↔ domain ------------------------------------------------------------------
def entry_from_proto(message: common_pb2.KbEntry) -> KbEntry:
    return KbEntry(
        id=message.id,
        question=message.question,
        answer=message.answer,
        metadata=dict(message.metadata),
        chunks=tuple(Chunk(c.id, c.text, c.title) for c in message.chunks),
    )


def entry_to_proto(entry: KbEntry) -> common_pb2.KbEntry:
    return common_pb2.KbEntry(
        id=entry.id,
        question=entry.question,
        answer=entry.answer,
        metadata=dict(entry.metadata),
        chunks=[common_pb2.Chunk(id=c.id, text=c.text, title=c.title) for c in entry.chunks],
    )


def query_from_proto(message: retrieval_pb2.SearchRequest, *, field: str = "") -> SearchQuery:
    mode = _MODES.get(message.mode)
    if mode is None:
        raise InvalidArgumentError(
            f"mode {message.mode} is not a SearchMode; use HYBRID, DENSE or SPARSE",
            field=f"{field}mode",
        )
    return SearchQuery(
        collection=message.collection,
        text=message.query,
        top_k=message.top_k,
        mode=mode,
        rerank=message.rerank,
    )


def result_to_proto(result: SearchResult) -> retrieval_pb2.SearchResponse:
    return retrieval_pb2.SearchResponse(
        hits=[
            retrieval_pb2.SearchHit(
                entry=entry_to_proto(hit.entry),
                score=hit.score,
                rank=hit.rank,
                dense_score=hit.dense_score,
                dense_rank=hit.dense_rank,
                sparse_score=hit.sparse_score,
                sparse_rank=hit.sparse_rank,
                rerank_score=hit.rerank_score,
                matched_chunk_id=hit.matched_unit_id,
            )
            for hit in result.hits
        ],
        latencies=[
            common_pb2.StageLatency(stage=stage, milliseconds=ms)
            for stage, ms in result.stage_milliseconds.items()
        ],
    )


def _stats_to_proto(stats: CollectionStats) -> retrieval_pb2.CollectionStats:
    return retrieval_pb2.CollectionStats(
        name=stats.name,
        entries=stats.entries,
        chunks=stats.chunks,
        index_type=stats.index_type,
        dimension=stats.dimension,
        embedder=stats.embedder,
        gpu=stats.gpu,
    )


# -- the servicer ----------------------------------------------------------------------
class RetrievalServicer(retrieval_pb2_grpc.RetrievalServiceServicer):
    """Serves a :class:`KnowledgeBase`, set by :meth:`load` (or given ready-made).

    Args:
        kb_factory: Builds the knowledge base (loads the embedder and indexes).
    """

    def __init__(self, kb_factory: Callable[[], KnowledgeBase]) -> None:
        self._factory = kb_factory
        self._kb: KnowledgeBase | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Build the knowledge base (the ServiceHost loader)."""
        kb = self._factory()
        with self._lock:
            self._kb = kb

    def close(self) -> None:
        """Snapshot and close the collections."""
        with self._lock:
            kb, self._kb = self._kb, None
        if kb is not None:
            kb.close()

    @property
    def kb(self) -> KnowledgeBase:
        kb = self._kb
        if kb is None:
            raise UnavailableError("the retrieval service is still loading; retry shortly")
        return kb

    def Search(
        self, request: retrieval_pb2.SearchRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.SearchResponse:
        query = query_from_proto(request)
        return result_to_proto(self.kb.search(query))

    def BatchSearch(
        self, request: retrieval_pb2.BatchSearchRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.BatchSearchResponse:
        queries = [
            query_from_proto(search, field=f"searches[{i}].")
            for i, search in enumerate(request.searches)
        ]
        results = self.kb.search_batch(queries)
        return retrieval_pb2.BatchSearchResponse(results=[result_to_proto(r) for r in results])

    def Upsert(
        self, request: retrieval_pb2.UpsertRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.UpsertResponse:
        entries = [entry_from_proto(e) for e in request.entries]
        result = self.kb.upsert(request.collection, entries, create=request.create_collection)
        return retrieval_pb2.UpsertResponse(
            upserted=result.upserted, total_entries=result.total_entries
        )

    def Delete(
        self, request: retrieval_pb2.DeleteRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.DeleteResponse:
        result = self.kb.delete(request.collection, list(request.ids))
        return retrieval_pb2.DeleteResponse(
            deleted=result.deleted, missing_ids=list(result.missing_ids)
        )

    def Stats(
        self, request: retrieval_pb2.StatsRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.StatsResponse:
        stats = self.kb.stats(request.collection)
        return retrieval_pb2.StatsResponse(collections=[_stats_to_proto(s) for s in stats])


class _RetrievalHost(ServiceHost):
    """A ServiceHost that snapshots the collections after it stops serving."""

    def __init__(self, settings: Settings, servicer: RetrievalServicer) -> None:
        super().__init__(
            settings.server,
            name="retrieval",
            bindings=[binding(servicer)],
            loader=servicer.load,
        )
        self.servicer = servicer

    def stop(self, grace: float | None = None) -> None:
        super().stop(grace)
        self.servicer.close()


def binding(servicer: RetrievalServicer) -> ServiceBinding:
    """Mounts ``servicer`` as ``tribunal.v1.RetrievalService``."""
    return ServiceBinding(
        SERVICE_NAME,
        lambda server: retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server(  # type: ignore[no-untyped-call]
            servicer, server
        ),
    )


def profile_reranker(settings: Settings) -> Reranker | None:
    """The profile's reranker, loaded at the first ``rerank=true`` search (an LLM is
    large and slow to load; a service that never reranks never loads it)."""
    if not settings.retrieval.rerank_enabled or settings.roles is None:
        return None
    spec = settings.model_spec(settings.roles.reranker)
    return LazyReranker(
        lambda: load_profile_reranker(settings),
        name=spec.artifact or spec.hf_id or settings.roles.reranker,
    )


def build_host(settings: Settings, reranker: Reranker | None = None) -> ServiceHost:
    """The retrieval service in a ServiceHost (not started): ``tribunal serve retrieval``.

    The loader loads the embedder and opens every collection under
    ``data_dir/retrieval``; health reports SERVING after that.

    Args:
        settings: The profile.
        reranker: Overrides the profile's (lazily loaded) reranker.
    """
    chosen = reranker or profile_reranker(settings)
    servicer = RetrievalServicer(lambda: KnowledgeBase.from_settings(settings, chosen))
    return _RetrievalHost(settings, servicer)
