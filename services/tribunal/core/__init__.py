"""Core of every Tribunal service: settings, errors, logging, model cache.

Framework-free: nothing here imports grpc or ray. The gRPC runtime is in
:mod:`tribunal.core.server`; model artifacts in :mod:`tribunal.core.models`.
"""

from ._deadline import RequestBudget, check_deadline, request_scope, time_left
from ._errors import (
    ConfigError,
    DeadlineExceededError,
    ErrorCode,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    ModelIntegrityError,
    ModelNotInstalledError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TribunalError,
    UnauthenticatedError,
    UnavailableError,
)
from ._loading import MODEL_LOAD_LOCK, load_embedder, model_path, resolve_device
from ._logging import JsonFormatter, configure_logging, quiet_third_party
from ._text import pack_sentences, split_sentences, split_text
from .settings import (
    ConfidenceSettings,
    DebateSettings,
    DeploymentSettings,
    EnsembleSettings,
    EntailmentSettings,
    GatewaySettings,
    LLMSettings,
    ModelSpec,
    RetrievalSettings,
    RoleSettings,
    ServerSettings,
    Settings,
    available_profiles,
    load_settings,
    resolve_profile_path,
)

__all__ = [
    "MODEL_LOAD_LOCK",
    "ConfidenceSettings",
    "ConfigError",
    "DeadlineExceededError",
    "DebateSettings",
    "DeploymentSettings",
    "EnsembleSettings",
    "EntailmentSettings",
    "ErrorCode",
    "FailedPreconditionError",
    "GatewaySettings",
    "InternalError",
    "InvalidArgumentError",
    "JsonFormatter",
    "LLMSettings",
    "ModelIntegrityError",
    "ModelNotInstalledError",
    "ModelSpec",
    "NotFoundError",
    "PermissionDeniedError",
    "RequestBudget",
    "ResourceExhaustedError",
    "RetrievalSettings",
    "RoleSettings",
    "ServerSettings",
    "Settings",
    "TribunalError",
    "UnauthenticatedError",
    "UnavailableError",
    "available_profiles",
    "check_deadline",
    "configure_logging",
    "load_embedder",
    "load_settings",
    "model_path",
    "pack_sentences",
    "quiet_third_party",
    "request_scope",
    "resolve_device",
    "resolve_profile_path",
    "split_sentences",
    "split_text",
    "time_left",
]
