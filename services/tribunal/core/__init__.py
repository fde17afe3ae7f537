"""Core of every Tribunal service: settings, errors, logging, model cache.

Framework-free: nothing here imports grpc or ray. The gRPC runtime is in
:mod:`tribunal.core.server`; model artifacts in :mod:`tribunal.core.models`.
"""

from ._artifacts import resolve_artifact, shipped_artifact
from ._deadline import RequestBudget, check_deadline, request_scope
from ._errors import (
    ConfigError,
    DeadlineExceededError,
    ErrorCode,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TribunalError,
    UnauthenticatedError,
    UnavailableError,
)
from ._jsonl import JsonlRow, jsonl_rows, parse_jsonl
from ._loading import (
    MODEL_LOAD_LOCK,
    TUNED_MODEL_PREFIX,
    embedder_version,
    load_embedder,
    model_path,
    resolve_device,
)
from ._logging import configure_logging, quiet_third_party
from ._python_turns import python_turn, take_python_turns
from ._text import pack_sentences, split_sentences, split_text
from ._threads import apply_thread_policy, use_torch_threads
from .settings import (
    DeploymentSettings,
    EnsembleSettings,
    GatewaySettings,
    RetrievalSettings,
    ServerSettings,
    Settings,
    available_profiles,
    load_settings,
)

__all__ = [
    "MODEL_LOAD_LOCK",
    "TUNED_MODEL_PREFIX",
    "ConfigError",
    "DeadlineExceededError",
    "DeploymentSettings",
    "EnsembleSettings",
    "ErrorCode",
    "FailedPreconditionError",
    "GatewaySettings",
    "InternalError",
    "InvalidArgumentError",
    "JsonlRow",
    "NotFoundError",
    "PermissionDeniedError",
    "RequestBudget",
    "ResourceExhaustedError",
    "RetrievalSettings",
    "ServerSettings",
    "Settings",
    "TribunalError",
    "UnauthenticatedError",
    "UnavailableError",
    "apply_thread_policy",
    "available_profiles",
    "check_deadline",
    "configure_logging",
    "embedder_version",
    "jsonl_rows",
    "load_embedder",
    "load_settings",
    "model_path",
    "pack_sentences",
    "parse_jsonl",
    "python_turn",
    "quiet_third_party",
    "request_scope",
    "resolve_artifact",
    "resolve_device",
    "shipped_artifact",
    "split_sentences",
    "split_text",
    "take_python_turns",
    "use_torch_threads",
]
