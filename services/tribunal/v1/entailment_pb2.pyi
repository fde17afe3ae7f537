from tribunal.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EntailmentLabel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENTAILMENT_LABEL_UNSPECIFIED: _ClassVar[EntailmentLabel]
    ENTAILMENT_LABEL_ENTAILED: _ClassVar[EntailmentLabel]
    ENTAILMENT_LABEL_NEUTRAL: _ClassVar[EntailmentLabel]
    ENTAILMENT_LABEL_CONTRADICTED: _ClassVar[EntailmentLabel]
    ENTAILMENT_LABEL_QUOTE_NOT_FOUND: _ClassVar[EntailmentLabel]

class CheckStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CHECK_STAGE_UNSPECIFIED: _ClassVar[CheckStage]
    CHECK_STAGE_QUOTE: _ClassVar[CheckStage]
    CHECK_STAGE_FAST: _ClassVar[CheckStage]
    CHECK_STAGE_STRONG: _ClassVar[CheckStage]
ENTAILMENT_LABEL_UNSPECIFIED: EntailmentLabel
ENTAILMENT_LABEL_ENTAILED: EntailmentLabel
ENTAILMENT_LABEL_NEUTRAL: EntailmentLabel
ENTAILMENT_LABEL_CONTRADICTED: EntailmentLabel
ENTAILMENT_LABEL_QUOTE_NOT_FOUND: EntailmentLabel
CHECK_STAGE_UNSPECIFIED: CheckStage
CHECK_STAGE_QUOTE: CheckStage
CHECK_STAGE_FAST: CheckStage
CHECK_STAGE_STRONG: CheckStage

class EntailmentPair(_message.Message):
    __slots__ = ("premise", "hypothesis", "quote")
    PREMISE_FIELD_NUMBER: _ClassVar[int]
    HYPOTHESIS_FIELD_NUMBER: _ClassVar[int]
    QUOTE_FIELD_NUMBER: _ClassVar[int]
    premise: str
    hypothesis: str
    quote: str
    def __init__(self, premise: _Optional[str] = ..., hypothesis: _Optional[str] = ..., quote: _Optional[str] = ...) -> None: ...

class CheckRequest(_message.Message):
    __slots__ = ("pairs", "fast_only")
    PAIRS_FIELD_NUMBER: _ClassVar[int]
    FAST_ONLY_FIELD_NUMBER: _ClassVar[int]
    pairs: _containers.RepeatedCompositeFieldContainer[EntailmentPair]
    fast_only: bool
    def __init__(self, pairs: _Optional[_Iterable[_Union[EntailmentPair, _Mapping]]] = ..., fast_only: _Optional[bool] = ...) -> None: ...

class QuoteMatch(_message.Message):
    __slots__ = ("found", "ratio", "start", "end")
    FOUND_FIELD_NUMBER: _ClassVar[int]
    RATIO_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    found: bool
    ratio: float
    start: int
    end: int
    def __init__(self, found: _Optional[bool] = ..., ratio: _Optional[float] = ..., start: _Optional[int] = ..., end: _Optional[int] = ...) -> None: ...

class SupportingChunk(_message.Message):
    __slots__ = ("index", "text", "start")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    index: int
    text: str
    start: int
    def __init__(self, index: _Optional[int] = ..., text: _Optional[str] = ..., start: _Optional[int] = ...) -> None: ...

class EntailmentResult(_message.Message):
    __slots__ = ("p_entail", "p_contradict", "label", "decided_by", "supporting_chunk", "quote", "model")
    P_ENTAIL_FIELD_NUMBER: _ClassVar[int]
    P_CONTRADICT_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    SUPPORTING_CHUNK_FIELD_NUMBER: _ClassVar[int]
    QUOTE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    p_entail: float
    p_contradict: float
    label: EntailmentLabel
    decided_by: CheckStage
    supporting_chunk: SupportingChunk
    quote: QuoteMatch
    model: str
    def __init__(self, p_entail: _Optional[float] = ..., p_contradict: _Optional[float] = ..., label: _Optional[_Union[EntailmentLabel, str]] = ..., decided_by: _Optional[_Union[CheckStage, str]] = ..., supporting_chunk: _Optional[_Union[SupportingChunk, _Mapping]] = ..., quote: _Optional[_Union[QuoteMatch, _Mapping]] = ..., model: _Optional[str] = ...) -> None: ...

class CheckResponse(_message.Message):
    __slots__ = ("results", "strong_calls", "usage", "checker_version")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    STRONG_CALLS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    CHECKER_VERSION_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[EntailmentResult]
    strong_calls: int
    usage: _common_pb2.TokenUsage
    checker_version: str
    def __init__(self, results: _Optional[_Iterable[_Union[EntailmentResult, _Mapping]]] = ..., strong_calls: _Optional[int] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., checker_version: _Optional[str] = ...) -> None: ...

class QuoteQuery(_message.Message):
    __slots__ = ("premise", "quote")
    PREMISE_FIELD_NUMBER: _ClassVar[int]
    QUOTE_FIELD_NUMBER: _ClassVar[int]
    premise: str
    quote: str
    def __init__(self, premise: _Optional[str] = ..., quote: _Optional[str] = ...) -> None: ...

class CheckQuotesRequest(_message.Message):
    __slots__ = ("quotes",)
    QUOTES_FIELD_NUMBER: _ClassVar[int]
    quotes: _containers.RepeatedCompositeFieldContainer[QuoteQuery]
    def __init__(self, quotes: _Optional[_Iterable[_Union[QuoteQuery, _Mapping]]] = ...) -> None: ...

class CheckQuotesResponse(_message.Message):
    __slots__ = ("matches",)
    MATCHES_FIELD_NUMBER: _ClassVar[int]
    matches: _containers.RepeatedCompositeFieldContainer[QuoteMatch]
    def __init__(self, matches: _Optional[_Iterable[_Union[QuoteMatch, _Mapping]]] = ...) -> None: ...
