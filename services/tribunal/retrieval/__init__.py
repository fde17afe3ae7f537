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
Entries and their files are :mod:`tribunal.kb`; the embedders, :mod:`tribunal.embedding`.
"""

from ._change_audit import AuditedWrites, KbChange, KbChangeLog
from ._collection import Collection
from ._dense import DenseIndex, UnitMatch, choose_index_type, gpu_count
from ._fusion import reciprocal_rank_fusion
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
from ._sparse import SparseIndex
from ._types import (
    CollectionStats,
    DeleteResult,
    SearchHit,
    SearchMode,
    SearchQuery,
    SearchResult,
    UpsertResult,
)
from ._verification import (
    SERVABLE,
    ClaimCheck,
    EntailmentChecker,
    EntryVerification,
    EntryVerifier,
    VerificationVerdict,
    split_claims,
)

__all__ = [
    "SERVABLE",
    "AuditedWrites",
    "ClaimCheck",
    "Collection",
    "CollectionStats",
    "CrossEncoderReranker",
    "DeleteResult",
    "DenseIndex",
    "EntailmentChecker",
    "EntryVerification",
    "EntryVerifier",
    "KbChange",
    "KbChangeLog",
    "KnowledgeBase",
    "LazyReranker",
    "LlmReranker",
    "Reranker",
    "SearchHit",
    "SearchMode",
    "SearchQuery",
    "SearchResult",
    "SparseIndex",
    "UnitMatch",
    "UpsertResult",
    "VerificationVerdict",
    "VerifyReport",
    "choose_index_type",
    "gpu_count",
    "load_profile_reranker",
    "reciprocal_rank_fusion",
    "rerank_passage",
    "rerank_prompt",
    "split_claims",
]
