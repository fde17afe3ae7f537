"""The retrieval service as a Ray Serve application.

One deployment wraps the domain :class:`~tribunal.retrieval.KnowledgeBase`.
Single searches arriving concurrently have their queries embedded together
by ``@serve.batch`` (``max_batch_size`` / ``batch_wait_timeout_s`` from
settings; ``max_ongoing_requests`` is kept >= ``max_batch_size`` by the
settings validator, or batches could never fill). Replicas, CPUs/GPUs and
autoscaling come from ``settings.retrieval.deployment``.

Callers inside Ray (the gateway) use a ``DeploymentHandle`` and the domain
methods (``search``, ``batch_search``, ``upsert``, ``delete``, ``stats``);
Serve's gRPC proxy calls the proto-named methods (``Search``, ...), which
translate with the same functions as the plain gRPC servicer.

Replicas of one collection directory stay consistent through the store's
change log: each replays other replicas' writes before it searches.

    serve.run(build_app(load_settings()), name="retrieval")
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray
from ray import serve
from ray.serve import Application

from ..core import Settings
from ..deploy import ServeApp, gathered, serve_caller, size_gathered
from ..kb import KbEntry, entry_from_proto
from ..v1 import retrieval_pb2
from ._change_audit import AuditedWrites
from ._knowledge_base import KnowledgeBase
from ._types import (
    CollectionStats,
    DeleteResult,
    SearchMode,
    SearchQuery,
    SearchResult,
    UpsertResult,
)
from .servicer import (
    batch_search_response,
    delete_response,
    open_change_log,
    profile_reranker,
    queries_from_proto,
    query_from_proto,
    result_to_proto,
    self_evidenced_from_proto,
    sign_response,
    signed_from_proto,
    stats_response,
    upsert_response,
)

__all__ = ["RetrievalDeployment", "build_app"]


@serve.deployment(name="retrieval")
class RetrievalDeployment(ServeApp, service="retrieval"):
    """A replica: the embedder, the collections, batched query embedding.

    Args:
        settings_data: ``Settings.model_dump(mode="json")`` of the driver (a
            plain dict travels to the replica; the profile file need not).
    """

    def __init__(self, settings_data: dict[str, Any]) -> None:
        settings = Settings(**settings_data)
        super().__init__(settings)
        self.kb = KnowledgeBase.from_settings(settings, profile_reranker(settings))
        # Every write, from the proxy or a handle, is audited under its caller's name.
        self.writes = AuditedWrites(self.kb, open_change_log(settings))
        size_gathered(self, settings.retrieval.deployment)

    @gathered
    def embed_query(self, texts: list[str]) -> list[NDArray[np.float32]]:
        """One query in, one vector out; Serve gathers concurrent calls into one batch."""
        return list(self.kb.embed_queries(texts))

    # -- domain methods (DeploymentHandle callers) --------------------------------------
    async def search(self, query: SearchQuery) -> SearchResult:
        self.kb.validate(query)
        if self.kb.embedder_of(query.collection) is not self.kb.embedder:
            # Searched with its own model (a tuned one): that embedder batches concurrent
            # calls itself.
            return (await asyncio.to_thread(self.kb.search_batch, [query]))[0]
        vectors = np.zeros((1, self.kb.embedder.dimension), dtype=np.float32)
        if query.mode is not SearchMode.SPARSE:
            vectors[0] = await self.embed_query(query.text)
        results = await asyncio.to_thread(self.kb.search_batch, [query], query_vectors=vectors)
        return results[0]

    async def batch_search(self, queries: Sequence[SearchQuery]) -> list[SearchResult]:
        # Already a batch: embed it in one pass rather than through the queue.
        return await asyncio.to_thread(self.kb.search_batch, list(queries))

    async def upsert(
        self,
        collection: str,
        entries: Sequence[KbEntry],
        create: bool = False,
        self_evidenced: bool | None = None,
    ) -> UpsertResult:
        return await asyncio.to_thread(
            self.writes.upsert,
            serve_caller().name,
            collection,
            list(entries),
            create=create,
            self_evidenced=self_evidenced,
        )

    async def delete(self, collection: str, ids: Sequence[str]) -> DeleteResult:
        return await asyncio.to_thread(
            self.writes.delete, serve_caller().name, collection, list(ids)
        )

    async def stats(self, collection: str = "") -> list[CollectionStats]:
        return await asyncio.to_thread(self.kb.stats, collection)

    # -- proto methods (Serve's gRPC proxy) -----------------------------------------------
    async def Search(
        self, request: retrieval_pb2.SearchRequest, grpc_context: Any = None
    ) -> retrieval_pb2.SearchResponse:
        return result_to_proto(await self.search(query_from_proto(request)), request.request_id)

    async def BatchSearch(
        self, request: retrieval_pb2.BatchSearchRequest, grpc_context: Any = None
    ) -> retrieval_pb2.BatchSearchResponse:
        return batch_search_response(await self.batch_search(queries_from_proto(request)), request)

    async def Upsert(
        self, request: retrieval_pb2.UpsertRequest, grpc_context: Any = None
    ) -> retrieval_pb2.UpsertResponse:
        entries = [entry_from_proto(e) for e in request.entries]
        result = await self.upsert(
            request.collection,
            entries,
            request.create_collection,
            self_evidenced_from_proto(request),
        )
        return upsert_response(result)

    async def Delete(
        self, request: retrieval_pb2.DeleteRequest, grpc_context: Any = None
    ) -> retrieval_pb2.DeleteResponse:
        return delete_response(await self.delete(request.collection, list(request.ids)))

    async def Stats(
        self, request: retrieval_pb2.StatsRequest, grpc_context: Any = None
    ) -> retrieval_pb2.StatsResponse:
        return stats_response(await self.stats(request.collection))

    async def Sign(
        self, request: retrieval_pb2.SignRequest, grpc_context: Any = None
    ) -> retrieval_pb2.SignResponse:
        signed = signed_from_proto(request)
        result = await asyncio.to_thread(self.kb.store_signatures, request.collection, signed)
        return sign_response(result)

    def __del__(self) -> None:
        # Replica shutdown: write snapshots so the next replica loads instead of rebuilding.
        kb = getattr(self, "kb", None)
        if kb is not None:
            kb.close()


def build_app(settings: Settings) -> Application:
    """The retrieval application, configured from ``settings.retrieval.deployment``."""
    deployment = cast(Any, RetrievalDeployment).options(
        **settings.retrieval.deployment.ray_options()
    )
    app: Application = deployment.bind(settings.model_dump(mode="json"))
    return app
