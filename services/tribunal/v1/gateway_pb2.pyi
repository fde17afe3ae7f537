from tribunal.v1 import common_pb2 as _common_pb2
from tribunal.v1 import debate_pb2 as _debate_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FallbackReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FALLBACK_REASON_UNSPECIFIED: _ClassVar[FallbackReason]
    FALLBACK_REASON_LOW_CONFIDENCE: _ClassVar[FallbackReason]
    FALLBACK_REASON_NO_CANDIDATE: _ClassVar[FallbackReason]
    FALLBACK_REASON_STAGE_ERROR: _ClassVar[FallbackReason]
    FALLBACK_REASON_STAGE_TIMEOUT: _ClassVar[FallbackReason]
    FALLBACK_REASON_MALFORMED_RESPONSE: _ClassVar[FallbackReason]
    FALLBACK_REASON_UNVERIFIED: _ClassVar[FallbackReason]
    FALLBACK_REASON_NO_CERTIFIED_THRESHOLD: _ClassVar[FallbackReason]

class LabelMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LABEL_MODE_UNSPECIFIED: _ClassVar[LabelMode]
    LABEL_MODE_CASCADE: _ClassVar[LabelMode]
    LABEL_MODE_DEBATE: _ClassVar[LabelMode]
    LABEL_MODE_JUDGE: _ClassVar[LabelMode]

class LabelSource(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LABEL_SOURCE_UNSPECIFIED: _ClassVar[LabelSource]
    LABEL_SOURCE_JUDGES: _ClassVar[LabelSource]
    LABEL_SOURCE_DEBATE: _ClassVar[LabelSource]
    LABEL_SOURCE_HUMAN_QUEUE: _ClassVar[LabelSource]
FALLBACK_REASON_UNSPECIFIED: FallbackReason
FALLBACK_REASON_LOW_CONFIDENCE: FallbackReason
FALLBACK_REASON_NO_CANDIDATE: FallbackReason
FALLBACK_REASON_STAGE_ERROR: FallbackReason
FALLBACK_REASON_STAGE_TIMEOUT: FallbackReason
FALLBACK_REASON_MALFORMED_RESPONSE: FallbackReason
FALLBACK_REASON_UNVERIFIED: FallbackReason
FALLBACK_REASON_NO_CERTIFIED_THRESHOLD: FallbackReason
LABEL_MODE_UNSPECIFIED: LabelMode
LABEL_MODE_CASCADE: LabelMode
LABEL_MODE_DEBATE: LabelMode
LABEL_MODE_JUDGE: LabelMode
LABEL_SOURCE_UNSPECIFIED: LabelSource
LABEL_SOURCE_JUDGES: LabelSource
LABEL_SOURCE_DEBATE: LabelSource
LABEL_SOURCE_HUMAN_QUEUE: LabelSource

class AnswerRequest(_message.Message):
    __slots__ = ("query", "collection", "request_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    COLLECTION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    collection: str
    request_id: str
    def __init__(self, query: _Optional[str] = ..., collection: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class Evidence(_message.Message):
    __slots__ = ("chunk_id", "text", "p_entail")
    CHUNK_ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    P_ENTAIL_FIELD_NUMBER: _ClassVar[int]
    chunk_id: str
    text: str
    p_entail: float
    def __init__(self, chunk_id: _Optional[str] = ..., text: _Optional[str] = ..., p_entail: _Optional[float] = ...) -> None: ...

class AnswerResponse(_message.Message):
    __slots__ = ("decision", "answer", "kb_entry_id", "confidence", "threshold", "evidence", "fallback_reason", "failed_stage", "audit_id", "latencies", "request_id", "answer_sha256", "kb_version", "evidence_policy", "checker_version", "entry_sha256")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    KB_ENTRY_ID_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_REASON_FIELD_NUMBER: _ClassVar[int]
    FAILED_STAGE_FIELD_NUMBER: _ClassVar[int]
    AUDIT_ID_FIELD_NUMBER: _ClassVar[int]
    LATENCIES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    ANSWER_SHA256_FIELD_NUMBER: _ClassVar[int]
    KB_VERSION_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_POLICY_FIELD_NUMBER: _ClassVar[int]
    CHECKER_VERSION_FIELD_NUMBER: _ClassVar[int]
    ENTRY_SHA256_FIELD_NUMBER: _ClassVar[int]
    decision: _common_pb2.Decision
    answer: str
    kb_entry_id: str
    confidence: float
    threshold: float
    evidence: _containers.RepeatedCompositeFieldContainer[Evidence]
    fallback_reason: FallbackReason
    failed_stage: str
    audit_id: str
    latencies: _containers.RepeatedCompositeFieldContainer[_common_pb2.StageLatency]
    request_id: str
    answer_sha256: str
    kb_version: int
    evidence_policy: str
    checker_version: str
    entry_sha256: str
    def __init__(self, decision: _Optional[_Union[_common_pb2.Decision, str]] = ..., answer: _Optional[str] = ..., kb_entry_id: _Optional[str] = ..., confidence: _Optional[float] = ..., threshold: _Optional[float] = ..., evidence: _Optional[_Iterable[_Union[Evidence, _Mapping]]] = ..., fallback_reason: _Optional[_Union[FallbackReason, str]] = ..., failed_stage: _Optional[str] = ..., audit_id: _Optional[str] = ..., latencies: _Optional[_Iterable[_Union[_common_pb2.StageLatency, _Mapping]]] = ..., request_id: _Optional[str] = ..., answer_sha256: _Optional[str] = ..., kb_version: _Optional[int] = ..., evidence_policy: _Optional[str] = ..., checker_version: _Optional[str] = ..., entry_sha256: _Optional[str] = ...) -> None: ...

class LabelRequest(_message.Message):
    __slots__ = ("query", "chunk", "answers", "mode", "item_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    chunk: str
    answers: _containers.RepeatedScalarFieldContainer[str]
    mode: LabelMode
    item_id: str
    def __init__(self, query: _Optional[str] = ..., chunk: _Optional[str] = ..., answers: _Optional[_Iterable[str]] = ..., mode: _Optional[_Union[LabelMode, str]] = ..., item_id: _Optional[str] = ...) -> None: ...

class LabelResponse(_message.Message):
    __slots__ = ("label", "source", "p_relevant", "debate", "escalation_id", "audit_id", "usage", "item_id")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    P_RELEVANT_FIELD_NUMBER: _ClassVar[int]
    DEBATE_FIELD_NUMBER: _ClassVar[int]
    ESCALATION_ID_FIELD_NUMBER: _ClassVar[int]
    AUDIT_ID_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    label: _common_pb2.Label
    source: LabelSource
    p_relevant: float
    debate: _debate_pb2.AssessResponse
    escalation_id: str
    audit_id: str
    usage: _common_pb2.TokenUsage
    item_id: str
    def __init__(self, label: _Optional[_Union[_common_pb2.Label, str]] = ..., source: _Optional[_Union[LabelSource, str]] = ..., p_relevant: _Optional[float] = ..., debate: _Optional[_Union[_debate_pb2.AssessResponse, _Mapping]] = ..., escalation_id: _Optional[str] = ..., audit_id: _Optional[str] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., item_id: _Optional[str] = ...) -> None: ...

class BatchLabelRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[LabelRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[LabelRequest, _Mapping]]] = ...) -> None: ...

class BatchLabelResponse(_message.Message):
    __slots__ = ("index", "result", "error_code", "error_message")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    index: int
    result: LabelResponse
    error_code: str
    error_message: str
    def __init__(self, index: _Optional[int] = ..., result: _Optional[_Union[LabelResponse, _Mapping]] = ..., error_code: _Optional[str] = ..., error_message: _Optional[str] = ...) -> None: ...
