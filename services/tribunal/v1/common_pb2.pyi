from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Label(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LABEL_UNSPECIFIED: _ClassVar[Label]
    LABEL_RELEVANT: _ClassVar[Label]
    LABEL_IRRELEVANT: _ClassVar[Label]

class Decision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DECISION_UNSPECIFIED: _ClassVar[Decision]
    DECISION_ACCEPT: _ClassVar[Decision]
    DECISION_FALLBACK: _ClassVar[Decision]
    DECISION_ESCALATE: _ClassVar[Decision]
LABEL_UNSPECIFIED: Label
LABEL_RELEVANT: Label
LABEL_IRRELEVANT: Label
DECISION_UNSPECIFIED: Decision
DECISION_ACCEPT: Decision
DECISION_FALLBACK: Decision
DECISION_ESCALATE: Decision

class Chunk(_message.Message):
    __slots__ = ("id", "text", "title")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    id: str
    text: str
    title: str
    def __init__(self, id: _Optional[str] = ..., text: _Optional[str] = ..., title: _Optional[str] = ...) -> None: ...

class KbEntry(_message.Message):
    __slots__ = ("id", "question", "answer", "metadata", "chunks", "questions")
    class MetadataEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ID_FIELD_NUMBER: _ClassVar[int]
    QUESTION_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    QUESTIONS_FIELD_NUMBER: _ClassVar[int]
    id: str
    question: str
    answer: str
    metadata: _containers.ScalarMap[str, str]
    chunks: _containers.RepeatedCompositeFieldContainer[Chunk]
    questions: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, id: _Optional[str] = ..., question: _Optional[str] = ..., answer: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., chunks: _Optional[_Iterable[_Union[Chunk, _Mapping]]] = ..., questions: _Optional[_Iterable[str]] = ...) -> None: ...

class TokenUsage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ...) -> None: ...

class StageLatency(_message.Message):
    __slots__ = ("stage", "milliseconds")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    MILLISECONDS_FIELD_NUMBER: _ClassVar[int]
    stage: str
    milliseconds: float
    def __init__(self, stage: _Optional[str] = ..., milliseconds: _Optional[float] = ...) -> None: ...

class Provenance(_message.Message):
    __slots__ = ("profile", "models", "prompts", "artifacts")
    class ModelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class PromptsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class ArtifactsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    MODELS_FIELD_NUMBER: _ClassVar[int]
    PROMPTS_FIELD_NUMBER: _ClassVar[int]
    ARTIFACTS_FIELD_NUMBER: _ClassVar[int]
    profile: str
    models: _containers.ScalarMap[str, str]
    prompts: _containers.ScalarMap[str, str]
    artifacts: _containers.ScalarMap[str, str]
    def __init__(self, profile: _Optional[str] = ..., models: _Optional[_Mapping[str, str]] = ..., prompts: _Optional[_Mapping[str, str]] = ..., artifacts: _Optional[_Mapping[str, str]] = ...) -> None: ...
