"""Decision and stage metrics, so a dashboard shows the fallback rate next to the load.

Defined with :class:`tribunal.core.server.Metric`: ``prometheus_client`` in a plain
process, ``ray.serve.metrics`` inside the gateway's Serve replicas (exported by Ray
as ``ray_tribunal_gateway_*``, which the chart's Grafana dashboard reads).
"""

from __future__ import annotations

from collections.abc import Mapping

from ..core.server import Metric

__all__ = [
    "DECISIONS",
    "LIVE_AUDITED",
    "LIVE_LOWER",
    "LIVE_UPPER",
    "RESTARTS",
    "RESTART_AUDITED",
    "RESTART_LOWER",
    "RESTART_UPPER",
    "SAFE_MODE",
    "SHIFT_WARNING",
    "STAGE_LATENCY",
    "record_decision",
    "record_live_state",
]

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

# The live audit of each collection (read from its latest live state on every answer).
LIVE_LOWER = Metric(
    "gauge",
    "tribunal_audit_live_rate_lower",
    "Lower end of the anytime-valid bound on the live hallucination rate of accepted answers.",
    ["collection"],
)
LIVE_UPPER = Metric(
    "gauge",
    "tribunal_audit_live_rate_upper",
    "Upper end of the anytime-valid bound on the live hallucination rate of accepted answers.",
    ["collection"],
)
LIVE_AUDITED = Metric(
    "gauge",
    "tribunal_audit_audited",
    "Accepted answers audited by reviewers in the live bound's stream.",
    ["collection"],
)
# The latest restarted sequence (started when the shift warning came on, or on schedule):
# it sees a change that the answers before it would dilute in the cumulative bound.
RESTART_LOWER = Metric(
    "gauge",
    "tribunal_audit_restart_rate_lower",
    "Lower end of the latest restarted bound on the live hallucination rate (answers since "
    "its start).",
    ["collection"],
)
RESTART_UPPER = Metric(
    "gauge",
    "tribunal_audit_restart_rate_upper",
    "Upper end of the latest restarted bound on the live hallucination rate (answers since "
    "its start).",
    ["collection"],
)
RESTART_AUDITED = Metric(
    "gauge",
    "tribunal_audit_restart_audited",
    "Accepted answers audited by reviewers since the latest restarted bound started.",
    ["collection"],
)
RESTARTS = Metric(
    "gauge",
    "tribunal_audit_restarts",
    "Restarted bounds of the served calibrator version so far (0: only the cumulative one).",
    ["collection"],
)
SAFE_MODE = Metric(
    "gauge",
    "tribunal_audit_safe_mode",
    "1 while the collection serves in its safe mode (the live bound showed rate > alpha).",
    ["collection", "mode"],
)
SHIFT_WARNING = Metric(
    "gauge",
    "tribunal_audit_shift_warning",
    "1 when live signals differ from the calibration traffic's (two-sample KS test).",
    ["collection"],
)


def record_decision(
    kind: str, decision: str, reason: str, latencies_ms: Mapping[str, float]
) -> None:
    DECISIONS.labels(kind, decision, reason or "none").inc()
    for stage, milliseconds in latencies_ms.items():
        STAGE_LATENCY.labels(stage).observe(milliseconds / 1000.0)


SAFE_MODES = ("fallback", "escalate", "stricter")


def record_live_state(
    collection: str,
    *,
    lower: float,
    upper: float,
    audited: int,
    mode: str,
    shift_warning: bool,
    restart: tuple[int, float, float, int] = (0, 0.0, 1.0, 0),
) -> None:
    """The gauges of a collection's live audit (its latest live state); ``restart``: the
    latest restarted bound's (number of restarts, lower, upper, audited)."""
    LIVE_LOWER.labels(collection).set(lower)
    LIVE_UPPER.labels(collection).set(upper)
    LIVE_AUDITED.labels(collection).set(audited)
    restarts, restart_lower, restart_upper, restart_audited = restart
    RESTARTS.labels(collection).set(restarts)
    RESTART_LOWER.labels(collection).set(restart_lower)
    RESTART_UPPER.labels(collection).set(restart_upper)
    RESTART_AUDITED.labels(collection).set(restart_audited)
    SHIFT_WARNING.labels(collection).set(1.0 if shift_warning else 0.0)
    for name in SAFE_MODES:
        SAFE_MODE.labels(collection, name).set(1.0 if mode == name else 0.0)
