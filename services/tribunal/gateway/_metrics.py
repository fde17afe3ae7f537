"""Decision and stage metrics, so a dashboard shows the fallback rate next to the load.

Defined with :class:`tribunal.core.server.Metric`: ``prometheus_client`` in a plain
process, ``ray.serve.metrics`` inside the gateway's Serve replicas (exported by Ray
as ``ray_tribunal_gateway_*``, which the chart's Grafana dashboard reads).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.server import Metric

__all__ = ["DECISIONS", "STAGE_LATENCY", "record_decision"]

DECISIONS = Metric(
    "counter",
    "tribunal_gateway_decisions_total",
    "Gateway decisions by kind (answer/label), decision and fallback/escalation reason.",
    ["kind", "decision", "reason"],
)
STAGE_LATENCY = Metric(
    "histogram",
    "tribunal_gateway_stage_seconds",
    "Time the gateway spent waiting on each stage, in seconds.",
    ["stage"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)


def record_decision(
    kind: str, decision: str, reason: str, latencies_ms: Mapping[str, float]
) -> None:
    DECISIONS.labels(kind, decision, reason or "none").inc()
    for stage, milliseconds in latencies_ms.items():
        STAGE_LATENCY.labels(stage).observe(milliseconds / 1000.0)
