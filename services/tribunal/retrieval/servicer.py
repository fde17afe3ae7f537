"""gRPC adapter of the retrieval service: ``tribunal.v1.RetrievalService``.

Each method is three small steps: translate the request into domain values
(rejecting what cannot be translated), run the :class:`KnowledgeBase`, build
the response. Errors are Tribunal errors; the runtime's interceptor maps
them to status codes (INVALID_ARGUMENT, NOT_FOUND, ...).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

import grpc

from ..core import (
    InvalidArgumentError,
    Settings,
    UnavailableError,
    python_turn,
)
from ..core.server import RequestLimits, ServiceBinding, ServiceHost, caller_of
from ..core.storage import Database
from ..kb import entry_from_proto, entry_to_proto
from ..v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc
from ._change_audit import AuditedWrites, KbChangeLog
from ._knowledge_base import KnowledgeBase
from ._rerank import LazyReranker, Reranker, load_profile_reranker
from ._signing import SignatureError, SignedRecord, parse_record
from ._types import (
    CollectionStats,
    DeleteResult,
    SearchMode,
    SearchQuery,
    SearchResult,
    SignResult,
    UpsertResult,
)
from ._verification import EntryVerification, VerificationVerdict

__all__ = [
    "RetrievalServicer",
    "batch_search_response",
    "build_host",
    "delete_response",
    "open_change_log",
    "profile_reranker",
    "queries_from_proto",
    "query_from_proto",
    "result_to_proto",
    "self_evidenced_from_proto",
    "sign_response",
    "signed_from_proto",
    "signed_to_proto",
    "stats_response",
    "upsert_response",
    "verification_to_proto",
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
        leave_out_own_phrasing=message.leave_out_own_phrasing,
    )


_VERDICTS = {
    VerificationVerdict.UNVERIFIED: retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED,
    VerificationVerdict.VERIFIED: retrieval_pb2.VERIFICATION_VERDICT_VERIFIED,
    VerificationVerdict.FAILED: retrieval_pb2.VERIFICATION_VERDICT_FAILED,
    VerificationVerdict.NO_EVIDENCE: retrieval_pb2.VERIFICATION_VERDICT_NO_EVIDENCE,
    VerificationVerdict.SELF_EVIDENCED: retrieval_pb2.VERIFICATION_VERDICT_SELF_EVIDENCED,
}


def verification_to_proto(
    verification: EntryVerification | None,
) -> retrieval_pb2.EntryVerification:
    """An entry without a stored verification is UNVERIFIED (never served)."""
    if verification is None:
        return retrieval_pb2.EntryVerification(
            verdict=retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED,
            reason="no verification is stored for this entry version",
        )
    return retrieval_pb2.EntryVerification(
        verdict=_VERDICTS[verification.verdict],
        reason=verification.reason,
        entailed_chunk_ids=list(verification.entailed_chunk_ids),
        checker_version=verification.checker_version,
        models=list(verification.models),
        answer_sha256=verification.answer_sha256,
        entry_sha256=verification.entry_sha256,
        verified_at=verification.verified_at,
        claims=verification.claims,
        chunk_p_entail=dict(verification.chunk_p_entail),
    )


def signed_to_proto(signed: SignedRecord | None) -> retrieval_pb2.SignedRecord | None:
    if signed is None:
        return None
    return retrieval_pb2.SignedRecord(
        record=signed.record, key_id=signed.key_id, signature=signed.signature
    )


def signed_from_proto(request: retrieval_pb2.SignRequest) -> list[SignedRecord]:
    """The records of a Sign request; INVALID_ARGUMENT for one that is not a record."""
    out = []
    for i, item in enumerate(request.records):
        if not item.key_id or not item.signature:
            raise InvalidArgumentError(
                f"records[{i}] has no key_id or signature: sign it first", field="records"
            )
        if len(item.key_id) > 64 or len(item.signature) > 256:
            raise InvalidArgumentError(f"records[{i}]: key_id or signature too long")
        signed = SignedRecord(bytes(item.record), item.key_id, bytes(item.signature))
        try:
            parse_record(signed.record)
        except SignatureError as exc:
            raise InvalidArgumentError(f"records[{i}]: {exc}", field="records") from exc
        out.append(signed)
    return out


def sign_response(result: SignResult) -> retrieval_pb2.SignResponse:
    return retrieval_pb2.SignResponse(stored=result.stored, stale=result.stale)


def result_to_proto(result: SearchResult, request_id: str = "") -> retrieval_pb2.SearchResponse:
    return retrieval_pb2.SearchResponse(
        request_id=request_id,
        kb_version=result.kb_version,
        kb_content_version=result.kb_content_version,
        kb_head=signed_to_proto(result.signed_head),
        retrieval_model=result.retrieval_model,
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
                neighbour_vote=hit.neighbour_vote,
                matched_chunk_id=hit.matched_unit_id,
                verification=verification_to_proto(hit.verification),
                served=signed_to_proto(hit.served),
            )
            for hit in result.hits
        ],
        latencies=[
            common_pb2.StageLatency(stage=stage, milliseconds=ms)
            for stage, ms in result.stage_milliseconds.items()
        ],
    )


def queries_from_proto(request: retrieval_pb2.BatchSearchRequest) -> list[SearchQuery]:
    return [
        query_from_proto(search, field=f"searches[{i}].")
        for i, search in enumerate(request.searches)
    ]


def batch_search_response(
    results: Sequence[SearchResult], request: retrieval_pb2.BatchSearchRequest | None = None
) -> retrieval_pb2.BatchSearchResponse:
    ids = [s.request_id for s in request.searches] if request is not None else [""] * len(results)
    return retrieval_pb2.BatchSearchResponse(
        results=[result_to_proto(r, i) for r, i in zip(results, ids, strict=True)]
    )


def upsert_response(result: UpsertResult) -> retrieval_pb2.UpsertResponse:
    counts = result.verdicts
    return retrieval_pb2.UpsertResponse(
        upserted=result.upserted,
        total_entries=result.total_entries,
        verified=counts.get(VerificationVerdict.VERIFIED.value, 0),
        failed=counts.get(VerificationVerdict.FAILED.value, 0),
        unverified=counts.get(VerificationVerdict.UNVERIFIED.value, 0),
        no_evidence=counts.get(VerificationVerdict.NO_EVIDENCE.value, 0),
        cached=result.cached,
        kb_version=result.kb_version,
        to_sign=[retrieval_pb2.SignedRecord(record=record) for record in result.to_sign],
    )


def self_evidenced_from_proto(request: retrieval_pb2.UpsertRequest) -> bool | None:
    """The policy an upsert sets, or None to keep the collection's."""
    return request.self_evidenced if request.HasField("self_evidenced") else None


def delete_response(result: DeleteResult) -> retrieval_pb2.DeleteResponse:
    return retrieval_pb2.DeleteResponse(
        deleted=result.deleted,
        missing_ids=list(result.missing_ids),
        kb_version=result.kb_version,
        to_sign=[retrieval_pb2.SignedRecord(record=record) for record in result.to_sign],
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
        load_error=stats.load_error,
    )


def stats_response(stats: Sequence[CollectionStats]) -> retrieval_pb2.StatsResponse:
    return retrieval_pb2.StatsResponse(collections=[_stats_to_proto(s) for s in stats])


# -- the servicer ----------------------------------------------------------------------
class RetrievalServicer(retrieval_pb2_grpc.RetrievalServiceServicer):
    """Serves a :class:`KnowledgeBase`, set by :meth:`load` (or given ready-made).

    Args:
        kb_factory: Builds the knowledge base (loads the embedder and indexes).
        change_log: Opens the KB change audit; every Upsert and Delete is recorded
            there under the caller's credential name. None: writes are not audited
            (tests and benchmarks of the search path only).
    """

    def __init__(
        self,
        kb_factory: Callable[[], KnowledgeBase],
        *,
        change_log: Callable[[], KbChangeLog] | None = None,
    ) -> None:
        self._factory = kb_factory
        self._change_log = change_log
        self._kb: KnowledgeBase | None = None
        self._writes: AuditedWrites | None = None
        self._lock = threading.Lock()

    def load(self) -> None:
        """Build the knowledge base and open the change audit (the ServiceHost loader)."""
        kb = self._factory()
        changes = self._change_log() if self._change_log is not None else None
        if changes is None:
            log.warning("KB writes through this servicer are not audited (no change log)")
        with self._lock:
            self._kb = kb
            self._writes = AuditedWrites(kb, changes) if changes is not None else None

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
        result = self.kb.search(query)
        with python_turn():
            return result_to_proto(result, request.request_id)

    def BatchSearch(
        self, request: retrieval_pb2.BatchSearchRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.BatchSearchResponse:
        return batch_search_response(self.kb.search_batch(queries_from_proto(request)), request)

    def Upsert(
        self, request: retrieval_pb2.UpsertRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.UpsertResponse:
        entries = [entry_from_proto(e) for e in request.entries]
        create, policy = request.create_collection, self_evidenced_from_proto(request)
        kb, writes = self.kb, self._writes
        result = (
            writes.upsert(
                caller_of(context).name,
                request.collection,
                entries,
                create=create,
                self_evidenced=policy,
            )
            if writes is not None
            else kb.upsert(request.collection, entries, create=create, self_evidenced=policy)
        )
        return upsert_response(result)

    def Delete(
        self, request: retrieval_pb2.DeleteRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.DeleteResponse:
        ids = list(request.ids)
        kb, writes = self.kb, self._writes
        result = (
            writes.delete(caller_of(context).name, request.collection, ids)
            if writes is not None
            else kb.delete(request.collection, ids)
        )
        return delete_response(result)

    def Stats(
        self, request: retrieval_pb2.StatsRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.StatsResponse:
        return stats_response(self.kb.stats(request.collection))

    def Sign(
        self, request: retrieval_pb2.SignRequest, context: grpc.ServicerContext
    ) -> retrieval_pb2.SignResponse:
        signed = signed_from_proto(request)
        return sign_response(self.kb.store_signatures(request.collection, signed))


class _RetrievalHost(ServiceHost):
    """A ServiceHost that reports each collection's health (``<service>/collection/<name>``:
    NOT_SERVING for one that failed to load, while the others serve) and snapshots the
    collections after it stops serving."""

    def __init__(self, settings: Settings, servicer: RetrievalServicer) -> None:
        super().__init__(
            settings.server,
            request_limits=RequestLimits.from_settings(settings),
            name="retrieval",
            bindings=[binding(servicer)],
            loader=self._load_and_report,
        )
        self.servicer = servicer

    def _load_and_report(self) -> None:
        self.servicer.load()
        kb = self.servicer.kb
        failed = kb.failed_collections()
        for name in kb.collection_names():
            self.set_part_health(f"collection/{name}", name not in failed)

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


def open_change_log(settings: Settings) -> KbChangeLog:
    """The KB change audit in the store at ``database_url`` (schema prepared)."""
    db = Database(settings.database_url)
    db.create_schema()
    return KbChangeLog(db)


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
    servicer = RetrievalServicer(
        lambda: KnowledgeBase.from_settings(settings, chosen),
        change_log=lambda: open_change_log(settings),
    )
    return _RetrievalHost(settings, servicer)
