"""What the chart's Grafana dashboard queries, and whether something exports it.

Every series a panel (or a template variable) reads is named explicitly, so it can be
checked: ``ray_tribunal_*`` must be a Tribunal metric as Ray exports it from a Serve
replica (``tribunal.core.server.METRICS``), ``ray_serve_*`` a metric Ray Serve itself
records, ``DCGM_*`` a field NVIDIA's DCGM exporter publishes. The live proof that Ray
exports these under these names is ``tests/integration/test_metrics_ray.py``.

The *Replicas per service* panel shows, per application, the replicas Serve is aiming for
(``ray_serve_autoscaling_target_replicas``) and those it counts healthy
(``ray_serve_deployment_replica_healthy``): :func:`check_replica_panel`; the multi-node
test (``tests/integration/test_cluster.py``) reads the panel's series from a live
cluster's export while one application scales.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._common import CheckFailedError
from ._manifests import CHART

__all__ = [
    "DASHBOARD",
    "PROMETHEUS_TARGET_LABELS",
    "REPLICA_METRICS",
    "REPLICA_PANEL",
    "Query",
    "ReplicaSeries",
    "check_replica_panel",
    "dashboard_queries",
    "queried_series",
    "replica_series",
]

DASHBOARD = CHART / "dashboards" / "tribunal.json"

PROMETHEUS_TARGET_LABELS = frozenset(
    {"namespace", "pod", "container", "instance", "job", "endpoint", "worker_group"}
)
"""Labels Prometheus adds to a scraped series (the PodMonitor's target labels and its
``worker_group`` relabelling), so they are not looked for in Ray's export."""

_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_LABEL_VALUES = re.compile(r"label_values\(\s*[^,]+,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)")
_BARE_LABEL_VALUES = re.compile(r"label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,")
_PER_APPLICATION = re.compile(r"^\s*(sum|max|min|avg)\s+by\s*\(\s*application\s*\)\s*\(")

REPLICA_PANEL = "Replicas per service"
REPLICA_METRICS = {
    "target": "ray_serve_autoscaling_target_replicas",
    "healthy": "ray_serve_deployment_replica_healthy",
}
"""What the replicas panel shows (its legends' first word) -> the series Ray Serve's
controller exports for it, labelled by ``application`` and ``deployment``."""


@dataclass(frozen=True)
class Query:
    """One PromQL expression of the dashboard and where it is."""

    where: str
    expr: str


@dataclass
class SeriesUse:
    """A series a query reads and the labels it filters or groups by."""

    name: str
    labels: set[str] = field(default_factory=set)
    where: set[str] = field(default_factory=set)


def dashboard_queries(path: Path = DASHBOARD) -> list[Query]:
    board: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    queries = []
    for panel in board.get("panels", []):
        for target in panel.get("targets", []):
            if target.get("expr"):
                queries.append(Query(f"panel {panel.get('title')!r}", str(target["expr"])))
    for variable in board.get("templating", {}).get("list", []):
        query = variable.get("query")
        text = query.get("query") if isinstance(query, dict) else None
        if variable.get("type") == "query" and text:
            queries.append(Query(f"variable {variable.get('name')!r}", str(text)))
    return queries


def queried_series(queries: list[Query]) -> tuple[dict[str, SeriesUse], list[str]]:
    """The series the queries read (name -> labels used) and the problems found.

    A problem is a selector without a metric name (``{__name__=~"..."}``): such a
    query may match nothing under Ray and still look valid.
    """
    series: dict[str, SeriesUse] = {}
    problems = []
    for query in queries:
        # Label names in grouping clauses and label_values() apply to every series
        # of the expression (the dashboard's expressions each read one metric family).
        grouped = {
            label.strip()
            for clause in _GROUPING.findall(query.expr)
            for label in clause.split(",")
            if label.strip()
        }
        grouped |= set(_LABEL_VALUES.findall(query.expr))
        selectors = _SELECTOR.findall(query.expr)
        selectors += [(name, "") for name in _BARE_LABEL_VALUES.findall(query.expr)]
        if not selectors:
            problems.append(f"{query.where}: no series selector in {query.expr!r}")
        for name, matchers in selectors:
            if not name:
                problems.append(
                    f"{query.where}: a selector without a metric name ({{{matchers}}}); "
                    "name the series as Ray exports it"
                )
                continue
            use = series.setdefault(name, SeriesUse(name))
            use.labels |= {m for m, _ in _MATCHER.findall(matchers) if m != "__name__"}
            use.labels |= grouped
            use.where.add(query.where)
    return series, problems


@dataclass(frozen=True)
class ReplicaSeries:
    """One line of the replicas panel: which series, summed how across deployments."""

    kind: str
    """The legend's first word: ``target`` or ``healthy``."""
    metric: str
    aggregation: str
    """``sum``, ``max``, ``min`` or ``avg`` by application; empty when not per application."""
    legend: str


def replica_series(path: Path = DASHBOARD) -> dict[str, ReplicaSeries]:
    """The lines of the dashboard's :data:`REPLICA_PANEL` by kind (empty: no such panel)."""
    board: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    lines: dict[str, ReplicaSeries] = {}
    for panel in board.get("panels", []):
        if panel.get("title") != REPLICA_PANEL:
            continue
        for target in panel.get("targets", []):
            expr, legend = str(target.get("expr", "")), str(target.get("legendFormat", ""))
            names = [name for name, _ in _SELECTOR.findall(expr) if name]
            grouped = _PER_APPLICATION.match(expr)
            kind = legend.split(" ", 1)[0]
            lines[kind] = ReplicaSeries(
                kind, names[0] if names else "", grouped.group(1) if grouped else "", legend
            )
    return lines


def check_replica_panel(path: Path = DASHBOARD) -> list[str]:
    """The replicas panel shows each application's target and healthy replicas, from the
    series Ray Serve exports for them.

    Raises:
        CheckFailedError: the panel, a line, its series or its grouping is missing or wrong.
    """
    lines = replica_series(path)
    if not lines:
        raise CheckFailedError(f"{path.name}: no panel {REPLICA_PANEL!r}")
    problems = []
    for kind, metric in REPLICA_METRICS.items():
        line = lines.get(kind)
        if line is None:
            problems.append(f"panel {REPLICA_PANEL!r}: no line {kind!r} (legend '{kind} ...')")
            continue
        if line.metric != metric:
            problems.append(
                f"panel {REPLICA_PANEL!r}, {kind}: reads {line.metric or 'no series'}, "
                f"not {metric} (what Ray Serve exports)"
            )
        if not line.aggregation:
            problems.append(
                f"panel {REPLICA_PANEL!r}, {kind}: not one line per application "
                "(wrap it in sum|max by (application) (...))"
            )
        if "{{application}}" not in line.legend:
            problems.append(f"panel {REPLICA_PANEL!r}, {kind}: the legend names no application")
    if problems:
        raise CheckFailedError("\n".join(problems))
    return [
        f"dashboard: {REPLICA_PANEL!r} shows per application "
        + ", ".join(f"{kind} ({metric})" for kind, metric in REPLICA_METRICS.items())
    ]
