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

from ._change_audit import AuditedWrites
from ._dense import DenseIndex
from ._ingest_checked import read_entries_checked
from ._knowledge_base import KnowledgeBase, stored_content_version, stored_retrieval_model
from ._phrasing_links import PhrasingLink, PhrasingLinks, entry_questions
from ._rerank import load_profile_reranker
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
from ._types import SearchMode, SearchQuery, SignResult
from ._verification import SERVABLE, VerificationVerdict

__all__ = [
    "ENTRY_KIND",
    "HEAD_KIND",
    "SERVABLE",
    "AuditedWrites",
    "DenseIndex",
    "KbSigner",
    "KnowledgeBase",
    "PhrasingLink",
    "PhrasingLinks",
    "SearchMode",
    "SearchQuery",
    "SignResult",
    "SignatureError",
    "SignedRecord",
    "TrustedKeys",
    "VerificationVerdict",
    "canonical_record",
    "entry_questions",
    "entry_record",
    "head_record",
    "key_paths",
    "load_profile_reranker",
    "parse_record",
    "read_entries_checked",
    "stored_content_version",
    "stored_retrieval_model",
    "trusted_keys",
    "writer_signer",
]
