"""Tribunal's metrics reach Ray's metrics export from a real Serve replica.

A single-node Ray with its metrics export port runs a model-free application that
records the gateway's decision metrics through ``tribunal.core.server.Metric``; the
node's Prometheus endpoint must then carry every series the chart's Grafana
dashboard queries (``ray_serve_*`` and ``ray_tribunal_*``), with the labels the
queries filter and group by. Only the DCGM exporter's ``DCGM_*`` fields (a GPU
node's) and the labels Prometheus adds to a scrape (``namespace``, ``pod``...) cannot
come from here.
"""

from __future__ import annotations

import re
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO

pytest.importorskip("tribunal_lab")
from tribunal_lab.k8s_checks import (
    PROMETHEUS_TARGET_LABELS,
    dashboard_queries,
    queried_series,
)

pytestmark = [pytest.mark.ray, pytest.mark.slow]

_SAMPLE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="')


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def _exported(port: int) -> dict[str, set[str]]:
    """Series name -> label names, from the node's Prometheus endpoint."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    series: dict[str, set[str]] = {}
    for line in text.decode().splitlines():
        match = _SAMPLE.match(line)
        if match and not line.startswith("#"):
            series.setdefault(match[1], set()).update(_LABEL.findall(match[2] or ""))
    return series


@pytest.fixture
def ray_with_metrics(ray_temp_dir: Path) -> Iterator[int]:
    import ray
    from ray import serve
    from tribunal.deploy import start_ray_node

    port = _free_port()
    start_ray_node(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(ray_temp_dir),
        _node_ip_address="127.0.0.1",
        _metrics_export_port=port,
        # Report every 0.5 s (default 10 s), so the test waits seconds, not a minute.
        _system_config={"metrics_report_interval_ms": 500},
        logging_level="WARNING",
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO)}},
    )
    try:
        yield port
    finally:
        serve.shutdown()
        ray.shutdown()


def test_every_dashboard_series_is_exported_by_ray(ray_with_metrics: int) -> None:
    from ray import serve

    from tests.integration._metrics_app import app

    handle = serve.run(app, name="gateway", route_prefix=None)
    in_replica = handle.record.remote(False).result(timeout_s=60)
    with pytest.raises(Exception, match="asked to fail"):
        handle.record.remote(True).result(timeout_s=60)

    wanted, problems = queried_series(dashboard_queries())
    assert not problems, problems
    from_ray = {name: use for name, use in wanted.items() if not name.startswith("DCGM_")}
    assert "ray_tribunal_gateway_decisions_total" in from_ray
    assert "ray_tribunal_gateway_stage_seconds_bucket" in from_ray
    deadline = time.monotonic() + 90
    while True:
        exported = _exported(ray_with_metrics)
        missing = sorted(set(from_ray) - set(exported))
        if not missing or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert not missing, f"queried by the dashboard, not exported by Ray: {missing}"
    for name, use in from_ray.items():
        labels = use.labels - PROMETHEUS_TARGET_LABELS
        assert labels <= exported[name], (name, sorted(labels - exported[name]), use.where)
    # Serve's labels ride along: a panel can split Tribunal's series per application.
    assert {"application", "deployment", "replica"} <= exported[
        "ray_tribunal_gateway_decisions_total"
    ]
    # The process-local prometheus_client name never appears in Ray's export.
    assert "tribunal_gateway_decisions_total" not in exported
    # The replica knew it was one (so it recorded through ray.serve.metrics).
    assert in_replica is True
