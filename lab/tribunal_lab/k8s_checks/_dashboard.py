"""What the chart's Grafana dashboard queries, and whether something exports it.

Every series a panel (or a template variable) reads is named explicitly, so it can be
checked: ``ray_tribunal_*`` must be a Tribunal metric as Ray exports it from a Serve
replica (``tribunal.core.server.METRICS``), ``ray_serve_*`` a metric Ray Serve itself
records, ``DCGM_*`` a field NVIDIA's DCGM exporter publishes. The live proof that Ray
exports these under these names is ``tests/integration/test_metrics_ray.py``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._manifests import CHART

__all__ = [
    "DASHBOARD",
    "PROMETHEUS_TARGET_LABELS",
    "Query",
    "dashboard_queries",
    "queried_series",
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
