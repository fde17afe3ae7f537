"""The gRPC runtime shared by every service (this package may import grpc; domain code may not)."""

from ._admission import Admission, AdmissionInterceptor
from ._auth import OPEN_PREFIXES, UNCHECKED, AuthInterceptor, Caller, authorize, caller_of
from ._channel import bearer_metadata, open_channel
from ._credentials import (
    Credential,
    CredentialStore,
    Role,
    credentials_from,
    install_reload_signal,
    new_token,
    token_sha256,
)
from ._exposure import check_exposure, is_loopback
from ._host import ServiceBinding, ServiceHost
from ._interceptor import ServerInterceptor
from ._limits import REQUEST_LIMITS, RequestLimits
from ._metrics import (
    GRPC_IN_FLIGHT,
    GRPC_LATENCY,
    GRPC_REQUESTS,
    METRICS,
    SERVICE_READY,
    BoundMetric,
    Metric,
    in_serve_replica,
    start_metrics_server,
)
from ._roles import METHOD_ROLES, required_role
from ._status import (
    STATUS_BY_ERROR_CODE,
    UndecodableRequest,
    abort_with_error,
    status_for,
    tolerant_deserializer,
)

__all__ = [
    "GRPC_IN_FLIGHT",
    "GRPC_LATENCY",
    "GRPC_REQUESTS",
    "METHOD_ROLES",
    "METRICS",
    "OPEN_PREFIXES",
    "REQUEST_LIMITS",
    "SERVICE_READY",
    "STATUS_BY_ERROR_CODE",
    "UNCHECKED",
    "Admission",
    "AdmissionInterceptor",
    "AuthInterceptor",
    "BoundMetric",
    "Caller",
    "Credential",
    "CredentialStore",
    "Metric",
    "RequestLimits",
    "Role",
    "ServerInterceptor",
    "ServiceBinding",
    "ServiceHost",
    "UndecodableRequest",
    "abort_with_error",
    "authorize",
    "bearer_metadata",
    "caller_of",
    "check_exposure",
    "credentials_from",
    "in_serve_replica",
    "install_reload_signal",
    "is_loopback",
    "new_token",
    "open_channel",
    "required_role",
    "start_metrics_server",
    "status_for",
    "token_sha256",
    "tolerant_deserializer",
]
