from tribunal.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MatchRequest(_message.Message):
    __slots__ = ("query", "candidate")
    QUERY_FIELD_NUMBER: _ClassVar[int]
    CANDIDATE_FIELD_NUMBER: _ClassVar[int]
    query: str
    candidate: _common_pb2.KbEntry
    def __init__(self, query: _Optional[str] = ..., candidate: _Optional[_Union[_common_pb2.KbEntry, _Mapping]] = ...) -> None: ...

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
    __slots__ = ("p_match", "match", "judges", "aggregator", "artifact_version", "usage")
    P_MATCH_FIELD_NUMBER: _ClassVar[int]
    MATCH_FIELD_NUMBER: _ClassVar[int]
    JUDGES_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_FIELD_NUMBER: _ClassVar[int]
    ARTIFACT_VERSION_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    p_match: float
    match: bool
    judges: _containers.RepeatedCompositeFieldContainer[JudgeVerdict]
    aggregator: str
    artifact_version: str
    usage: _common_pb2.TokenUsage
    def __init__(self, p_match: _Optional[float] = ..., match: _Optional[bool] = ..., judges: _Optional[_Iterable[_Union[JudgeVerdict, _Mapping]]] = ..., aggregator: _Optional[str] = ..., artifact_version: _Optional[str] = ..., usage: _Optional[_Union[_common_pb2.TokenUsage, _Mapping]] = ...) -> None: ...

class BatchMatchRequest(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[MatchRequest]
    def __init__(self, items: _Optional[_Iterable[_Union[MatchRequest, _Mapping]]] = ...) -> None: ...

class BatchMatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[MatchResponse]
    def __init__(self, results: _Optional[_Iterable[_Union[MatchResponse, _Mapping]]] = ...) -> None: ...
