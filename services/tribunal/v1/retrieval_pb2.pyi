from tribunal.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SearchMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SEARCH_MODE_UNSPECIFIED: _ClassVar[SearchMode]
    SEARCH_MODE_HYBRID: _ClassVar[SearchMode]
    SEARCH_MODE_DENSE: _ClassVar[SearchMode]
    SEARCH_MODE_SPARSE: _ClassVar[SearchMode]

class VerificationVerdict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERIFICATION_VERDICT_UNSPECIFIED: _ClassVar[VerificationVerdict]
    VERIFICATION_VERDICT_UNVERIFIED: _ClassVar[VerificationVerdict]
    VERIFICATION_VERDICT_VERIFIED: _ClassVar[VerificationVerdict]
    VERIFICATION_VERDICT_FAILED: _ClassVar[VerificationVerdict]
    VERIFICATION_VERDICT_NO_EVIDENCE: _ClassVar[VerificationVerdict]
    VERIFICATION_VERDICT_SELF_EVIDENCED: _ClassVar[VerificationVerdict]
SEARCH_MODE_UNSPECIFIED: SearchMode
SEARCH_MODE_HYBRID: SearchMode
SEARCH_MODE_DENSE: SearchMode
SEARCH_MODE_SPARSE: SearchMode
VERIFICATION_VERDICT_UNSPECIFIED: VerificationVerdict
VERIFICATION_VERDICT_UNVERIFIED: VerificationVerdict
VERIFICATION_VERDICT_VERIFIED: VerificationVerdict
VERIFICATION_VERDICT_FAILED: VerificationVerdict
VERIFICATION_VERDICT_NO_EVIDENCE: VerificationVerdict
VERIFICATION_VERDICT_SELF_EVIDENCED: VerificationVerdict

class SignedRecord(_message.Message):
    __slots__ = ("record", "key_id", "signature")
    RECORD_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    record: bytes
    key_id: str
    signature: bytes
    def __init__(self, record: _Optional[bytes] = ..., key_id: _Optional[str] = ..., signature: _Optional[bytes] = ...) -> None: ...

class SignRequest(_message.Message):
    __slots__ = ("collection", "records")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    records: _containers.RepeatedCompositeFieldContainer[SignedRecord]
    def __init__(self, collection: _Optional[str] = ..., records: _Optional[_Iterable[_Union[SignedRecord, _Mapping]]] = ...) -> None: ...

class SignResponse(_message.Message):
    __slots__ = ("stored", "stale")
    STORED_FIELD_NUMBER: _ClassVar[int]
    STALE_FIELD_NUMBER: _ClassVar[int]
    stored: int
    stale: int
    def __init__(self, stored: _Optional[int] = ..., stale: _Optional[int] = ...) -> None: ...

class SearchRequest(_message.Message):
    __slots__ = ("collection", "query", "top_k", "mode", "rerank", "request_id", "leave_out_own_phrasing")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    RERANK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    LEAVE_OUT_OWN_PHRASING_FIELD_NUMBER: _ClassVar[int]
    collection: str
    query: str
    top_k: int
    mode: SearchMode
    rerank: bool
    request_id: str
    leave_out_own_phrasing: bool
    def __init__(self, collection: _Optional[str] = ..., query: _Optional[str] = ..., top_k: _Optional[int] = ..., mode: _Optional[_Union[SearchMode, str]] = ..., rerank: _Optional[bool] = ..., request_id: _Optional[str] = ..., leave_out_own_phrasing: _Optional[bool] = ...) -> None: ...

class EntryVerification(_message.Message):
    __slots__ = ("verdict", "reason", "entailed_chunk_ids", "checker_version", "models", "answer_sha256", "entry_sha256", "verified_at", "claims", "chunk_p_entail")
    class ChunkPEntailEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ENTAILED_CHUNK_IDS_FIELD_NUMBER: _ClassVar[int]
    CHECKER_VERSION_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SHA256_FIELD_NUMBER: _ClassVar[int]
    ENTRY_SHA256_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_AT_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_FIELD_NUMBER: _ClassVar[int]
    CHUNK_P_ENTAIL_FIELD_NUMBER: _ClassVar[int]
    verdict: VerificationVerdict
    reason: str
    entailed_chunk_ids: _containers.RepeatedScalarFieldContainer[str]
    checker_version: str
    models: _containers.RepeatedScalarFieldContainer[str]
    answer_sha256: str
    entry_sha256: str
    verified_at: str
    claims: int
    chunk_p_entail: _containers.ScalarMap[str, float]
    def __init__(self, verdict: _Optional[_Union[VerificationVerdict, str]] = ..., reason: _Optional[str] = ..., entailed_chunk_ids: _Optional[_Iterable[str]] = ..., checker_version: _Optional[str] = ..., models: _Optional[_Iterable[str]] = ..., answer_sha256: _Optional[str] = ..., entry_sha256: _Optional[str] = ..., verified_at: _Optional[str] = ..., claims: _Optional[int] = ..., chunk_p_entail: _Optional[_Mapping[str, float]] = ...) -> None: ...

class SearchHit(_message.Message):
    __slots__ = ("entry", "score", "rank", "dense_score", "dense_rank", "sparse_score", "sparse_rank", "rerank_score", "matched_chunk_id", "verification", "served", "neighbour_vote")
    ENTRY_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    DENSE_SCORE_FIELD_NUMBER: _ClassVar[int]
    DENSE_RANK_FIELD_NUMBER: _ClassVar[int]
    SPARSE_SCORE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_RANK_FIELD_NUMBER: _ClassVar[int]
    RERANK_SCORE_FIELD_NUMBER: _ClassVar[int]
    MATCHED_CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    VERIFICATION_FIELD_NUMBER: _ClassVar[int]
    SERVED_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOUR_VOTE_FIELD_NUMBER: _ClassVar[int]
    entry: _common_pb2.KbEntry
    score: float
    rank: int
    dense_score: float
    dense_rank: int
    sparse_score: float
    sparse_rank: int
    rerank_score: float
    matched_chunk_id: str
    verification: EntryVerification
    served: SignedRecord
    neighbour_vote: float
    def __init__(self, entry: _Optional[_Union[_common_pb2.KbEntry, _Mapping]] = ..., score: _Optional[float] = ..., rank: _Optional[int] = ..., dense_score: _Optional[float] = ..., dense_rank: _Optional[int] = ..., sparse_score: _Optional[float] = ..., sparse_rank: _Optional[int] = ..., rerank_score: _Optional[float] = ..., matched_chunk_id: _Optional[str] = ..., verification: _Optional[_Union[EntryVerification, _Mapping]] = ..., served: _Optional[_Union[SignedRecord, _Mapping]] = ..., neighbour_vote: _Optional[float] = ...) -> None: ...

class SearchResponse(_message.Message):
    __slots__ = ("hits", "latencies", "kb_version", "request_id", "kb_content_version", "kb_head", "retrieval_model")
    HITS_FIELD_NUMBER: _ClassVar[int]
    LATENCIES_FIELD_NUMBER: _ClassVar[int]
    KB_VERSION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    KB_CONTENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    KB_HEAD_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_MODEL_FIELD_NUMBER: _ClassVar[int]
    hits: _containers.RepeatedCompositeFieldContainer[SearchHit]
    latencies: _containers.RepeatedCompositeFieldContainer[_common_pb2.StageLatency]
    kb_version: int
    request_id: str
    kb_content_version: str
    kb_head: SignedRecord
    retrieval_model: str
    def __init__(self, hits: _Optional[_Iterable[_Union[SearchHit, _Mapping]]] = ..., latencies: _Optional[_Iterable[_Union[_common_pb2.StageLatency, _Mapping]]] = ..., kb_version: _Optional[int] = ..., request_id: _Optional[str] = ..., kb_content_version: _Optional[str] = ..., kb_head: _Optional[_Union[SignedRecord, _Mapping]] = ..., retrieval_model: _Optional[str] = ...) -> None: ...

class BatchSearchRequest(_message.Message):
    __slots__ = ("searches",)
    SEARCHES_FIELD_NUMBER: _ClassVar[int]
    searches: _containers.RepeatedCompositeFieldContainer[SearchRequest]
    def __init__(self, searches: _Optional[_Iterable[_Union[SearchRequest, _Mapping]]] = ...) -> None: ...

class BatchSearchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[SearchResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[SearchResponse, _Mapping]]] = ...) -> None: ...

class UpsertRequest(_message.Message):
    __slots__ = ("collection", "entries", "create_collection", "self_evidenced")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    CREATE_COLLECTION_FIELD_NUMBER: _ClassVar[int]
    SELF_EVIDENCED_FIELD_NUMBER: _ClassVar[int]
    collection: str
    entries: _containers.RepeatedCompositeFieldContainer[_common_pb2.KbEntry]
    create_collection: bool
    self_evidenced: bool
    def __init__(self, collection: _Optional[str] = ..., entries: _Optional[_Iterable[_Union[_common_pb2.KbEntry, _Mapping]]] = ..., create_collection: _Optional[bool] = ..., self_evidenced: _Optional[bool] = ...) -> None: ...

class UpsertResponse(_message.Message):
    __slots__ = ("upserted", "total_entries", "verified", "failed", "unverified", "no_evidence", "cached", "kb_version", "to_sign")
    UPSERTED_FIELD_NUMBER: _ClassVar[int]
    TOTAL_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    VERIFIED_FIELD_NUMBER: _ClassVar[int]
    FAILED_FIELD_NUMBER: _ClassVar[int]
    UNVERIFIED_FIELD_NUMBER: _ClassVar[int]
    NO_EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    KB_VERSION_FIELD_NUMBER: _ClassVar[int]
    TO_SIGN_FIELD_NUMBER: _ClassVar[int]
    upserted: int
    total_entries: int
    verified: int
    failed: int
    unverified: int
    no_evidence: int
    cached: int
    kb_version: int
    to_sign: _containers.RepeatedCompositeFieldContainer[SignedRecord]
    def __init__(self, upserted: _Optional[int] = ..., total_entries: _Optional[int] = ..., verified: _Optional[int] = ..., failed: _Optional[int] = ..., unverified: _Optional[int] = ..., no_evidence: _Optional[int] = ..., cached: _Optional[int] = ..., kb_version: _Optional[int] = ..., to_sign: _Optional[_Iterable[_Union[SignedRecord, _Mapping]]] = ...) -> None: ...

class DeleteRequest(_message.Message):
    __slots__ = ("collection", "ids")
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    collection: str
    ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, collection: _Optional[str] = ..., ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DeleteResponse(_message.Message):
    __slots__ = ("deleted", "missing_ids", "kb_version", "to_sign")
    DELETED_FIELD_NUMBER: _ClassVar[int]
    MISSING_IDS_FIELD_NUMBER: _ClassVar[int]
    KB_VERSION_FIELD_NUMBER: _ClassVar[int]
    TO_SIGN_FIELD_NUMBER: _ClassVar[int]
    deleted: int
    missing_ids: _containers.RepeatedScalarFieldContainer[str]
    kb_version: int
    to_sign: _containers.RepeatedCompositeFieldContainer[SignedRecord]
    def __init__(self, deleted: _Optional[int] = ..., missing_ids: _Optional[_Iterable[str]] = ..., kb_version: _Optional[int] = ..., to_sign: _Optional[_Iterable[_Union[SignedRecord, _Mapping]]] = ...) -> None: ...

class StatsRequest(_message.Message):
    __slots__ = ("collection",)
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    collection: str
    def __init__(self, collection: _Optional[str] = ...) -> None: ...

class CollectionStats(_message.Message):
    __slots__ = ("name", "entries", "chunks", "index_type", "dimension", "embedder", "gpu", "load_error")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    INDEX_TYPE_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    EMBEDDER_FIELD_NUMBER: _ClassVar[int]
    GPU_FIELD_NUMBER: _ClassVar[int]
    LOAD_ERROR_FIELD_NUMBER: _ClassVar[int]
    name: str
    entries: int
    chunks: int
    index_type: str
    dimension: int
    embedder: str
    gpu: bool
    load_error: str
    def __init__(self, name: _Optional[str] = ..., entries: _Optional[int] = ..., chunks: _Optional[int] = ..., index_type: _Optional[str] = ..., dimension: _Optional[int] = ..., embedder: _Optional[str] = ..., gpu: _Optional[bool] = ..., load_error: _Optional[str] = ...) -> None: ...

class StatsResponse(_message.Message):
    __slots__ = ("collections",)
    COLLECTIONS_FIELD_NUMBER: _ClassVar[int]
    collections: _containers.RepeatedCompositeFieldContainer[CollectionStats]
    def __init__(self, collections: _Optional[_Iterable[_Union[CollectionStats, _Mapping]]] = ...) -> None: ...
