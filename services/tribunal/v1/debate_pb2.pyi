from tribunal.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DebateOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEBATE_OUTCOME_UNSPECIFIED: _ClassVar[DebateOutcome]
    DEBATE_OUTCOME_AGREED: _ClassVar[DebateOutcome]
    DEBATE_OUTCOME_ESCALATED: _ClassVar[DebateOutcome]
    DEBATE_OUTCOME_ADJUDICATED: _ClassVar[DebateOutcome]
    DEBATE_OUTCOME_FAILED: _ClassVar[DebateOutcome]
DEBATE_OUTCOME_UNSPECIFIED: DebateOutcome
DEBATE_OUTCOME_AGREED: DebateOutcome
DEBATE_OUTCOME_ESCALATED: DebateOutcome
DEBATE_OUTCOME_ADJUDICATED: DebateOutcome
DEBATE_OUTCOME_FAILED: DebateOutcome

class DebateOptions(_message.Message):
    __slots__ = ("swap_stance_order", "adjudicate")
    SWAP_STANCE_ORDER_FIELD_NUMBER: _ClassVar[int]
    ADJUDICATE_FIELD_NUMBER: _ClassVar[int]
    swap_stance_order: bool
    adjudicate: bool
    def __init__(self, swap_stance_order: _Optional[bool] = ..., adjudicate: _Optional[bool] = ...) -> None: ...

class AssessRequest(_message.Message):
    __slots__ = ("query", "chunk", "answers", "max_rounds", "options", "item_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    MAX_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    chunk: str
    answers: _containers.RepeatedScalarFieldContainer[str]
    max_rounds: int
    options: DebateOptions
    item_id: str
    def __init__(self, query: _Optional[str] = ..., chunk: _Optional[str] = ..., answers: _Optional[_Iterable[str]] = ..., max_rounds: _Optional[int] = ..., options: _Optional[_Union[DebateOptions, _Mapping]] = ..., item_id: _Optional[str] = ...) -> None: ...

class DebateTurn(_message.Message):
    __slots__ = ("agent", "model", "label", "evidence", "rationale", "evidence_found", "usage")
    AGENT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    RATIONALE_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FOUND_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    agent: str
    model: str
    label: _common_pb2.Label
    evidence: str
    rationale: str
    evidence_found: bool
    usage: _common_pb2.TokenUsage
    def __init__(self, agent: _Optional[str] = ..., model: _Optional[str] = ..., label: _Optional[_Union[_common_pb2.Label, str]] = ..., evidence: _Optional[str] = ..., rationale: _Optional[str] = ..., evidence_found: _Optional[bool] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ...) -> None: ...

class DebateRound(_message.Message):
    __slots__ = ("number", "turns")
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    number: int
    turns: _containers.RepeatedCompositeFieldContainer[DebateTurn]
    def __init__(self, number: _Optional[int] = ..., turns: _Optional[_Iterable[_Union[DebateTurn, _Mapping]]] = ...) -> None: ...

class AssessResponse(_message.Message):
    __slots__ = ("label", "outcome", "rounds", "adjudication", "usage", "milliseconds", "item_id", "error", "provenance")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    ADJUDICATION_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    MILLISECONDS_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    PROVENANCE_FIELD_NUMBER: _ClassVar[int]
    label: _common_pb2.Label
    outcome: DebateOutcome
    rounds: _containers.RepeatedCompositeFieldContainer[DebateRound]
    adjudication: str
    usage: _common_pb2.TokenUsage
    milliseconds: float
    item_id: str
    error: str
    provenance: _common_pb2.Provenance
    def __init__(self, label: _Optional[_Union[_common_pb2.Label, str]] = ..., outcome: _Optional[_Union[DebateOutcome, str]] = ..., rounds: _Optional[_Iterable[_Union[DebateRound, _Mapping]]] = ..., adjudication: _Optional[str] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., milliseconds: _Optional[float] = ..., item_id: _Optional[str] = ..., error: _Optional[str] = ..., provenance: _Optional[_Union[_common_pb2.Provenance, _Mapping]] = ...) -> None: ...

class BatchAssessRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[AssessRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[AssessRequest, _Mapping]]] = ...) -> None: ...

class BatchAssessResponse(_message.Message):
    __slots__ = ("index", "result")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    index: int
    result: AssessResponse
    def __init__(self, index: _Optional[int] = ..., result: _Optional[_Union[AssessResponse, _Mapping]] = ...) -> None: ...
