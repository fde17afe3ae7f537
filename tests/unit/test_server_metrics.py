"""Tribunal's metric definitions outside Ray (inside: tests/integration/test_metrics_ray.py)."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from tribunal.core.server import METRICS, Metric
from tribunal.core.server._metrics import in_serve_replica


def test_outside_a_replica_metrics_go_to_prometheus_client_under_their_own_name() -> None:
    registry = CollectorRegistry()
    calls = Metric("counter", "tribunal_test_calls_total", "Calls.", ["kind"], registry=registry)
    wait = Metric(
        "histogram",
        "tribunal_test_wait_seconds",
        "Wait.",
        ["stage"],
        buckets=(0.1, 1),
        registry=registry,
    )
    depth = Metric("gauge", "tribunal_test_depth", "Depth.", ["service"], registry=registry)
    assert not in_serve_replica()
    calls.labels("answer").inc()
    calls.labels("answer").inc(2)
    wait.labels("retrieval").observe(0.5)
    depth.labels("gateway").inc()
    depth.labels("gateway").dec()
    depth.labels("gateway").set(3)
    text = generate_latest(registry).decode()
    assert 'tribunal_test_calls_total{kind="answer"} 3.0' in text
    assert 'tribunal_test_wait_seconds_bucket{le="1.0",stage="retrieval"} 1.0' in text
    assert 'tribunal_test_depth{service="gateway"} 3.0' in text
    # What Ray exports for each from a Serve replica.
    assert calls.ray_name == "tribunal_test_calls"
    assert calls.exported_ray_names == ("ray_tribunal_test_calls_total",)
    assert wait.exported_ray_names == (
        "ray_tribunal_test_wait_seconds_bucket",
        "ray_tribunal_test_wait_seconds_count",
        "ray_tribunal_test_wait_seconds_sum",
    )
    assert METRICS["tribunal_test_calls_total"] is calls


def test_misuse_is_refused() -> None:
    registry = CollectorRegistry()
    with pytest.raises(ValueError, match="must end in _total"):
        Metric("counter", "tribunal_test_calls", "Calls.", [], registry=registry)
    with pytest.raises(ValueError, match="needs buckets"):
        Metric("histogram", "tribunal_test_h_seconds", "H.", [], registry=registry)
    counter = Metric("counter", "tribunal_test_c_total", "C.", ["a"], registry=registry)
    with pytest.raises(ValueError, match=r"takes labels \('a',\)"):
        counter.labels("x", "y")
    with pytest.raises(TypeError, match="only gauges go down"):
        counter.labels("x").dec()
    with pytest.raises(TypeError, match="only histograms observe"):
        counter.labels("x").observe(1.0)


def test_the_gateways_metrics_are_defined_once_for_both_exporters() -> None:
    from tribunal.gateway import _metrics

    assert isinstance(_metrics.DECISIONS, Metric)
    assert isinstance(_metrics.STAGE_LATENCY, Metric)
    assert "tribunal_gateway_decisions_total" in METRICS
