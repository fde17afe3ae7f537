from tribunal.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MatchRequest(_message.Message):
    __slots__ = ("query", "candidate", "item_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    candidate: _common_pb2.KbEntry
    item_id: str
    def __init__(self, query: _Optional[str] = ..., candidate: _Optional[_Union[_common_pb2.KbEntry, _Mapping]] = ..., item_id: _Optional[str] = ...) -> None: ...

class JudgeVerdict(_message.Message):
    __slots__ = ("judge", "model", "prompt", "vote", "p_yes")
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    VOTE_FIELD_NUMBER: _ClassVar[int]
    P_YES_FIELD_NUMBER: _ClassVar[int]
    judge: str
    model: str
    prompt: str
    vote: bool
    p_yes: float
    def __init__(self, judge: _Optional[str] = ..., model: _Optional[str] = ..., prompt: _Optional[str] = ..., vote: _Optional[bool] = ..., p_yes: _Optional[float] = ...) -> None: ...

class MatchResponse(_message.Message):
    __slots__ = ("p_match", "match", "judges", "aggregator", "artifact_version", "usage", "item_id", "threshold")
    P_MATCH_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    p_match: float
    match: bool
    judges: _containers.RepeatedCompositeFieldContainer[JudgeVerdict]
    aggregator: str
    artifact_version: str
    usage: _common_pb2.TokenUsage
    item_id: str
    threshold: float
    def __init__(self, p_match: _Optional[float] = ..., match: _Optional[bool] = ..., judges: _Optional[_Iterable[_Union[JudgeVerdict, _Mapping]]] = ..., aggregator: _Optional[str] = ..., artifact_version: _Optional[str] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., item_id: _Optional[str] = ..., threshold: _Optional[float] = ...) -> None: ...

class BatchMatchRequest(_message.Message):
    __slots__ = ("items", "request_id")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[MatchRequest]
    request_id: str
    def __init__(self, items: _Optional[_Iterable[_Union[MatchRequest, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class BatchMatchResponse(_message.Message):
    __slots__ = ("results", "request_id")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[MatchResponse]
    request_id: str
    def __init__(self, results: _Optional[_Iterable[_Union[MatchResponse, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class JudgeRelevanceRequest(_message.Message):
    __slots__ = ("query", "chunk", "answers", "item_id")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    ANSWERS_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    query: str
    chunk: str
    answers: _containers.RepeatedScalarFieldContainer[str]
    item_id: str
    def __init__(self, query: _Optional[str] = ..., chunk: _Optional[str] = ..., answers: _Optional[_Iterable[str]] = ..., item_id: _Optional[str] = ...) -> None: ...

class RelevanceFeatureValue(_message.Message):
    __slots__ = ("name", "value")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    name: str
    value: float
    def __init__(self, name: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...

class JudgeRelevanceResponse(_message.Message):
    __slots__ = ("p_relevant", "threshold", "band_low", "band_high", "features", "usage", "artifact_version", "item_id", "relevant")
    P_RELEVANT_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    BAND_LOW_FIELD_NUMBER: _ClassVar[int]
    BAND_HIGH_FIELD_NUMBER: _ClassVar[int]
    FEATURES_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    RELEVANT_FIELD_NUMBER: _ClassVar[int]
    p_relevant: float
    threshold: float
    band_low: float
    band_high: float
    features: _containers.RepeatedCompositeFieldContainer[RelevanceFeatureValue]
    usage: _common_pb2.TokenUsage
    artifact_version: str
    item_id: str
    relevant: bool
    def __init__(self, p_relevant: _Optional[float] = ..., threshold: _Optional[float] = ..., band_low: _Optional[float] = ..., band_high: _Optional[float] = ..., features: _Optional[_Iterable[_Union[RelevanceFeatureValue, _Mapping]]] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ..., artifact_version: _Optional[str] = ..., item_id: _Optional[str] = ..., relevant: _Optional[bool] = ...) -> None: ...
