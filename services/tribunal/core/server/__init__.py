"""The gRPC runtime shared by every service (this package may import grpc; domain code may not)."""

from ._host import ServiceBinding, ServiceHost
from ._interceptor import ServerInterceptor
from ._metrics import (
    GRPC_IN_FLIGHT,
    GRPC_LATENCY,
    GRPC_REQUESTS,
    SERVICE_READY,
    start_metrics_server,
)
from ._status import STATUS_BY_ERROR_CODE, abort_with_error, status_for

__all__ = [
    "GRPC_IN_FLIGHT",
    "GRPC_LATENCY",
    "GRPC_REQUESTS",
    "SERVICE_READY",
    "STATUS_BY_ERROR_CODE",
    "ServerInterceptor",
    "ServiceBinding",
    "ServiceHost",
    "abort_with_error",
    "start_metrics_server",
    "status_for",
]
