"""Hybrid search over verified knowledge bases (dense FAISS + BM25, RRF, rerank).

Framework-free domain logic: nothing here imports grpc or ray. The gRPC
adapter is :mod:`tribunal.retrieval.servicer`; the Ray Serve application
is :mod:`tribunal.retrieval.app`.

Typical use::

    kb = KnowledgeBase.from_settings(load_settings("tiny"))
    kb.upsert("covid", read_entries(path, max_chars=1000), create=True)
    kb.search(SearchQuery("covid", "how does the virus spread?", top_k=5))

Every upsert verifies its entries once (do their supporting chunks entail their
answers?) and stores the verdict with the entry version; search hits carry it.
"""

from ._batching import MicroBatchingEmbedder, prefetch_query_vectors, shared_profile_embedder
from ._change_audit import AuditedWrites, KbChange, KbChangeLog
from ._chunking import chunk_sentences, chunk_text, split_sentences
from ._collection import Collection
from ._dense import DenseIndex, UnitMatch, choose_index_type, gpu_count
from ._embedding import (
    CachingEmbedder,
    Embedder,
    SentenceTransformerEmbedder,
    WrappingEmbedder,
    load_profile_embedder,
)
from ._fusion import reciprocal_rank_fusion
from ._ingest import (
    RecordFormat,
    deduplicate,
    entry_from_record,
    entry_to_record,
    read_entries,
)
from ._knowledge_base import KnowledgeBase, VerifyReport
from ._phrasing_links import (
    LinkStatus,
    PhrasingLink,
    PhrasingLinks,
    entry_questions,
    normalised_query,
)
from ._rerank import (
    CrossEncoderReranker,
    LazyReranker,
    LlmReranker,
    Reranker,
    load_profile_reranker,
    rerank_passage,
    rerank_prompt,
)
from ._sparse import SparseIndex
from ._types import (
    ANSWER_UNIT_ID,
    QUESTION_UNIT_ID,
    Chunk,
    CollectionStats,
    DeleteResult,
    KbEntry,
    SearchHit,
    SearchMode,
    SearchQuery,
    SearchResult,
    UpsertResult,
    phrasing_index,
    phrasing_unit_id,
)
from ._vector_store import VectorStore
from ._verification import (
    SERVABLE,
    ClaimCheck,
    EntailmentChecker,
    EntryVerification,
    EntryVerifier,
    VerificationVerdict,
    answer_sha256,
    checker_version,
    entry_sha256,
    self_sourced,
    split_claims,
)

__all__ = [
    "ANSWER_UNIT_ID",
    "QUESTION_UNIT_ID",
    "SERVABLE",
    "AuditedWrites",
    "CachingEmbedder",
    "Chunk",
    "ClaimCheck",
    "Collection",
    "CollectionStats",
    "CrossEncoderReranker",
    "DeleteResult",
    "DenseIndex",
    "Embedder",
    "EntailmentChecker",
    "EntryVerification",
    "EntryVerifier",
    "KbChange",
    "KbChangeLog",
    "KbEntry",
    "KnowledgeBase",
    "LazyReranker",
    "LinkStatus",
    "LlmReranker",
    "MicroBatchingEmbedder",
    "PhrasingLink",
    "PhrasingLinks",
    "RecordFormat",
    "Reranker",
    "SearchHit",
    "SearchMode",
    "SearchQuery",
    "SearchResult",
    "SentenceTransformerEmbedder",
    "SparseIndex",
    "UnitMatch",
    "UpsertResult",
    "VectorStore",
    "VerificationVerdict",
    "VerifyReport",
    "WrappingEmbedder",
    "answer_sha256",
    "checker_version",
    "choose_index_type",
    "chunk_sentences",
    "chunk_text",
    "deduplicate",
    "entry_from_record",
    "entry_questions",
    "entry_sha256",
    "entry_to_record",
    "gpu_count",
    "load_profile_embedder",
    "load_profile_reranker",
    "normalised_query",
    "phrasing_index",
    "phrasing_unit_id",
    "prefetch_query_vectors",
    "read_entries",
    "reciprocal_rank_fusion",
    "rerank_passage",
    "rerank_prompt",
    "self_sourced",
    "shared_profile_embedder",
    "split_claims",
    "split_sentences",
]
