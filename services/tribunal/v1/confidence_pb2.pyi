from tribunal.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DebateSignal(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DEBATE_SIGNAL_UNSPECIFIED: _ClassVar[DebateSignal]
    DEBATE_SIGNAL_AGREED_RELEVANT: _ClassVar[DebateSignal]
    DEBATE_SIGNAL_AGREED_IRRELEVANT: _ClassVar[DebateSignal]
    DEBATE_SIGNAL_DISAGREED: _ClassVar[DebateSignal]

class ThresholdStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    THRESHOLD_STATUS_UNSPECIFIED: _ClassVar[ThresholdStatus]
    THRESHOLD_STATUS_CERTIFIED: _ClassVar[ThresholdStatus]
    THRESHOLD_STATUS_PLAIN: _ClassVar[ThresholdStatus]
    THRESHOLD_STATUS_NOT_CERTIFIED: _ClassVar[ThresholdStatus]
DEBATE_SIGNAL_UNSPECIFIED: DebateSignal
DEBATE_SIGNAL_AGREED_RELEVANT: DebateSignal
DEBATE_SIGNAL_AGREED_IRRELEVANT: DebateSignal
DEBATE_SIGNAL_DISAGREED: DebateSignal
THRESHOLD_STATUS_UNSPECIFIED: ThresholdStatus
THRESHOLD_STATUS_CERTIFIED: ThresholdStatus
THRESHOLD_STATUS_PLAIN: ThresholdStatus
THRESHOLD_STATUS_NOT_CERTIFIED: ThresholdStatus

class Signals(_message.Message):
    __slots__ = ("retrieval_score", "retrieval_rank", "dense_score", "sparse_score", "judge_p_yes", "ensemble_p_match", "entailment_p_entail", "entailment_p_contradict", "supporting_passages", "debate", "debate_rounds", "extra", "ensemble_p_match_margin", "neighbour_vote")
    class JudgePYesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    RETRIEVAL_SCORE_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_RANK_FIELD_NUMBER: _ClassVar[int]
    DENSE_SCORE_FIELD_NUMBER: _ClassVar[int]
    SPARSE_SCORE_FIELD_NUMBER: _ClassVar[int]
    JUDGE_P_YES_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLE_P_MATCH_FIELD_NUMBER: _ClassVar[int]
    ENTAILMENT_P_ENTAIL_FIELD_NUMBER: _ClassVar[int]
    ENTAILMENT_P_CONTRADICT_FIELD_NUMBER: _ClassVar[int]
    SUPPORTING_PASSAGES_FIELD_NUMBER: _ClassVar[int]
    DEBATE_FIELD_NUMBER: _ClassVar[int]
    DEBATE_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    ENSEMBLE_P_MATCH_MARGIN_FIELD_NUMBER: _ClassVar[int]
    NEIGHBOUR_VOTE_FIELD_NUMBER: _ClassVar[int]
    retrieval_score: float
    retrieval_rank: int
    dense_score: float
    sparse_score: float
    judge_p_yes: _containers.ScalarMap[str, float]
    ensemble_p_match: float
    entailment_p_entail: float
    entailment_p_contradict: float
    supporting_passages: int
    debate: DebateSignal
    debate_rounds: int
    extra: _containers.ScalarMap[str, float]
    ensemble_p_match_margin: float
    neighbour_vote: float
    def __init__(self, retrieval_score: _Optional[float] = ..., retrieval_rank: _Optional[int] = ..., dense_score: _Optional[float] = ..., sparse_score: _Optional[float] = ..., judge_p_yes: _Optional[_Mapping[str, float]] = ..., ensemble_p_match: _Optional[float] = ..., entailment_p_entail: _Optional[float] = ..., entailment_p_contradict: _Optional[float] = ..., supporting_passages: _Optional[int] = ..., debate: _Optional[_Union[DebateSignal, str]] = ..., debate_rounds: _Optional[int] = ..., extra: _Optional[_Mapping[str, float]] = ..., ensemble_p_match_margin: _Optional[float] = ..., neighbour_vote: _Optional[float] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("signals", "alpha", "item_id", "kb_content_version", "matcher_version", "retrieval_model")
    SIGNALS_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    KB_CONTENT_VERSION_FIELD_NUMBER: _ClassVar[int]
    MATCHER_VERSION_FIELD_NUMBER: _ClassVar[int]
    RETRIEVAL_MODEL_FIELD_NUMBER: _ClassVar[int]
    signals: Signals
    alpha: float
    item_id: str
    kb_content_version: str
    matcher_version: str
    retrieval_model: str
    def __init__(self, signals: _Optional[_Union[Signals, _Mapping]] = ..., alpha: _Optional[float] = ..., item_id: _Optional[str] = ..., kb_content_version: _Optional[str] = ..., matcher_version: _Optional[str] = ..., retrieval_model: _Optional[str] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("confidence", "decision", "threshold", "calibrator_version", "alpha", "item_id", "threshold_status")
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    CALIBRATOR_VERSION_FIELD_NUMBER: _ClassVar[int]
    ALPHA_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_STATUS_FIELD_NUMBER: _ClassVar[int]
    confidence: float
    decision: _common_pb2.Decision
    threshold: float
    calibrator_version: str
    alpha: float
    item_id: str
    threshold_status: ThresholdStatus
    def __init__(self, confidence: _Optional[float] = ..., decision: _Optional[_Union[_common_pb2.Decision, str]] = ..., threshold: _Optional[float] = ..., calibrator_version: _Optional[str] = ..., alpha: _Optional[float] = ..., item_id: _Optional[str] = ..., threshold_status: _Optional[_Union[ThresholdStatus, str]] = ...) -> None: ...

class BatchScoreRequest(_message.Message):
    __slots__ = ("items", "request_id")
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ScoreRequest]
    request_id: str
    def __init__(self, items: _Optional[_Iterable[_Union[ScoreRequest, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class BatchScoreResponse(_message.Message):
    __slots__ = ("results", "request_id")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ScoreResponse]
    request_id: str
    def __init__(self, results: _Optional[_Iterable[_Union[ScoreResponse, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...
