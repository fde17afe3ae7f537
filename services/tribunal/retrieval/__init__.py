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
    read_entries_checked,
)
from ._knowledge_base import KnowledgeBase, VerifyReport
from ._rerank import (
    CrossEncoderReranker,
    LazyReranker,
    LlmReranker,
    Reranker,
    load_profile_reranker,
    rerank_passage,
    rerank_prompt,
)
from ._signing import (
    ENTRY_KIND,
    HEAD_KIND,
    KbSigner,
    SignatureError,
    SignedRecord,
    TrustedKeys,
    canonical_record,
    entry_record,
    head_record,
    key_paths,
    parse_record,
    trusted_keys,
    writer_signer,
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
    SignResult,
    UpsertResult,
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
    "ENTRY_KIND",
    "HEAD_KIND",
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
    "KbSigner",
    "KnowledgeBase",
    "LazyReranker",
    "LlmReranker",
    "MicroBatchingEmbedder",
    "RecordFormat",
    "Reranker",
    "SearchHit",
    "SearchMode",
    "SearchQuery",
    "SearchResult",
    "SentenceTransformerEmbedder",
    "SignResult",
    "SignatureError",
    "SignedRecord",
    "SparseIndex",
    "TrustedKeys",
    "UnitMatch",
    "UpsertResult",
    "VectorStore",
    "VerificationVerdict",
    "VerifyReport",
    "WrappingEmbedder",
    "answer_sha256",
    "canonical_record",
    "checker_version",
    "choose_index_type",
    "chunk_sentences",
    "chunk_text",
    "deduplicate",
    "entry_from_record",
    "entry_record",
    "entry_sha256",
    "entry_to_record",
    "gpu_count",
    "head_record",
    "key_paths",
    "load_profile_embedder",
    "load_profile_reranker",
    "parse_record",
    "prefetch_query_vectors",
    "read_entries",
    "read_entries_checked",
    "reciprocal_rank_fusion",
    "rerank_passage",
    "rerank_prompt",
    "self_sourced",
    "shared_profile_embedder",
    "split_claims",
    "split_sentences",
    "trusted_keys",
    "writer_signer",
]
