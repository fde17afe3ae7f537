"""Tribunal's Prometheus metrics, exported the right way wherever the code runs.

One definition per metric, two exporters:

- in a plain process (``tribunal serve <service>``, tests): a ``prometheus_client``
  object, served on ``/metrics`` by :func:`start_metrics_server` under its own name
  (``tribunal_gateway_decisions_total``);
- inside a Ray Serve replica: a ``ray.serve.metrics`` object. Ray does not export
  ``prometheus_client``'s registry of a replica process; its metrics agent exports
  these, on each node's metrics port, with the prefix ``ray_``
  (``ray_tribunal_gateway_decisions_total``) and Serve's ``application``,
  ``deployment`` and ``replica`` labels added.

The choice is made at each call (is this process a Serve replica?), so the same
module serves both without configuration, and Ray is never imported here: a
replica has imported it already.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any, Literal

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client import start_http_server as _start_http_server

__all__ = [
    "GRPC_IN_FLIGHT",
    "GRPC_LATENCY",
    "GRPC_REQUESTS",
    "METRICS",
    "SERVICE_READY",
    "BoundMetric",
    "Metric",
    "in_serve_replica",
    "start_metrics_server",
]

Kind = Literal["counter", "gauge", "histogram"]

METRICS: dict[str, Metric] = {}
"""Every Tribunal metric defined so far, by its exported name (the dashboard check reads it)."""


def in_serve_replica() -> bool:
    """True inside a Ray Serve replica (its replica context is set)."""
    context = sys.modules.get("ray.serve.context")
    if context is None:
        return False
    return context._get_internal_replica_context() is not None


class Metric:
    """A counter, gauge or histogram with fixed label names, exported as described above.

    Args:
        kind: ``counter``, ``gauge`` or ``histogram``.
        name: The exported name outside Ray (a counter's ends in ``_total``); Ray
            exports ``ray_`` + the same name.
        description: The help text.
        labels: Label names, in the order :meth:`labels` takes their values.
        buckets: Histogram bucket bounds (seconds), ascending.
    """

    def __init__(
        self,
        kind: Kind,
        name: str,
        description: str,
        labels: Sequence[str],
        *,
        buckets: Sequence[float] = (),
        registry: CollectorRegistry | None = REGISTRY,
    ) -> None:
        if kind == "counter" and not name.endswith("_total"):
            raise ValueError(f"counter {name} must end in _total")
        if kind == "histogram" and not buckets:
            raise ValueError(f"histogram {name} needs buckets")
        self.kind = kind
        self.name = name
        self.description = description
        self.label_names = tuple(labels)
        self.buckets = tuple(buckets)
        self.prometheus: Any
        if kind == "counter":
            self.prometheus = Counter(name, description, self.label_names, registry=registry)
        elif kind == "gauge":
            self.prometheus = Gauge(name, description, self.label_names, registry=registry)
        else:
            self.prometheus = Histogram(
                name, description, self.label_names, buckets=self.buckets, registry=registry
            )
        self._ray: Any = None
        self._ray_gauge_values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        METRICS[name] = self

    @property
    def ray_name(self) -> str:
        """The name given to ``ray.serve.metrics`` (Ray adds ``_total`` to a counter)."""
        return self.name.removesuffix("_total") if self.kind == "counter" else self.name

    @property
    def exported_ray_names(self) -> tuple[str, ...]:
        """The series names Ray's metrics agent exports for this metric."""
        if self.kind != "histogram":
            return (f"ray_{self.name}",)
        return tuple(f"ray_{self.name}_{suffix}" for suffix in ("bucket", "count", "sum"))

    def labels(self, *values: str) -> BoundMetric:
        if len(values) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, got {values}")
        return BoundMetric(self, tuple(str(v) for v in values))

    def _ray_metric(self) -> Any:
        with self._lock:
            if self._ray is None:
                from ray.serve import metrics as serve_metrics

                tags: Any = self.label_names  # Ray's stubs say tuple[str]
                if self.kind == "counter":
                    self._ray = serve_metrics.Counter(self.ray_name, self.description, tags)
                elif self.kind == "gauge":
                    self._ray = serve_metrics.Gauge(self.ray_name, self.description, tags)
                else:
                    self._ray = serve_metrics.Histogram(
                        self.ray_name, self.description, list(self.buckets), tags
                    )
            return self._ray

    def _record(self, values: tuple[str, ...], op: str, amount: float) -> None:
        if not in_serve_replica():
            child = self.prometheus.labels(*values)
            getattr(child, op)(amount)
            return
        metric = self._ray_metric()
        tags = dict(zip(self.label_names, values, strict=True))
        if op == "inc" and self.kind == "counter":
            metric.inc(amount, tags=tags)
        elif op == "observe":
            metric.observe(amount, tags=tags)
        else:
            # Ray's gauge only sets: keep the value here for inc/dec.
            with self._lock:
                current = self._ray_gauge_values.get(values, 0.0)
                if op == "inc":
                    current += amount
                elif op == "dec":
                    current -= amount
                else:
                    current = amount
                self._ray_gauge_values[values] = current
            metric.set(current, tags=tags)


class BoundMetric:
    """One label combination of a :class:`Metric`."""

    def __init__(self, metric: Metric, values: tuple[str, ...]) -> None:
        self._metric = metric
        self._values = values

    def inc(self, amount: float = 1.0) -> None:
        self._metric._record(self._values, "inc", amount)

    def dec(self, amount: float = 1.0) -> None:
        if self._metric.kind != "gauge":
            raise TypeError(f"{self._metric.name} is a {self._metric.kind}: only gauges go down")
        self._metric._record(self._values, "dec", amount)

    def set(self, value: float) -> None:
        if self._metric.kind != "gauge":
            raise TypeError(f"{self._metric.name} is a {self._metric.kind}: only gauges are set")
        self._metric._record(self._values, "set", value)

    def observe(self, value: float) -> None:
        if self._metric.kind != "histogram":
            raise TypeError(
                f"{self._metric.name} is a {self._metric.kind}: only histograms observe"
            )
        self._metric._record(self._values, "observe", value)

    def __getattr__(self, name: str) -> Any:
        # Reads of the local value (``_value``, ``_sum``) go to the prometheus_client child.
        return getattr(self._metric.prometheus.labels(*self._values), name)


GRPC_REQUESTS = Metric(
    "counter",
    "tribunal_grpc_requests_total",
    "gRPC calls finished, by service, method and status code.",
    ["service", "method", "code"],
)
GRPC_LATENCY = Metric(
    "histogram",
    "tribunal_grpc_latency_seconds",
    "gRPC call latency in seconds, by service and method.",
    ["service", "method"],
    buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)
GRPC_IN_FLIGHT = Metric(
    "gauge",
    "tribunal_grpc_in_flight",
    "gRPC calls being served now (queue depth seen by the server).",
    ["service"],
)
SERVICE_READY = Metric(
    "gauge",
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
    already served returns it. Port 0 binds a free port. (Inside Ray, each node's
    metrics agent exports instead.)
    """
    with _servers_lock:
        if port and (host, port) in _servers:
            return _servers[(host, port)]
        server, _thread = _start_http_server(port, addr=host, registry=registry)
        bound = int(server.server_port)
        _servers[(host, port or bound)] = bound
        return bound
