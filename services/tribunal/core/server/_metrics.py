"""Prometheus metrics of gRPC servers (outside Ray; replicas use ``ray.serve.metrics``)."""

from __future__ import annotations

import threading

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import start_http_server as _start_http_server

__all__ = [
    "GRPC_IN_FLIGHT",
    "GRPC_LATENCY",
    "GRPC_REQUESTS",
    "SERVICE_READY",
    "start_metrics_server",
]

GRPC_REQUESTS = Counter(
    "tribunal_grpc_requests_total",
    "gRPC calls finished, by service, method and status code.",
    ["service", "method", "code"],
)
GRPC_LATENCY = Histogram(
    "tribunal_grpc_latency_seconds",
    "gRPC call latency in seconds, by service and method.",
    ["service", "method"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
GRPC_IN_FLIGHT = Gauge(
    "tribunal_grpc_in_flight",
    "gRPC calls being served now (queue depth seen by the server).",
    ["service"],
)
SERVICE_READY = Gauge(
    "tribunal_service_ready",
    "1 when the service's models are loaded and health reports SERVING.",
    ["service"],
)

_servers: dict[tuple[str, int], int] = {}
_servers_lock = threading.Lock()


def start_metrics_server(
    port: int, host: str = "127.0.0.1", registry: CollectorRegistry = REGISTRY
) -> int:
    """Serve ``/metrics`` on ``host:port`` once per process; returns the bound port.

    Several in-process services share one endpoint: a second call for a port
    already served returns it. Port 0 binds a free port.
    """
    with _servers_lock:
        if port and (host, port) in _servers:
            return _servers[(host, port)]
        server, _thread = _start_http_server(port, addr=host, registry=registry)
        bound = int(server.server_port)
        _servers[(host, port or bound)] = bound
        return bound
