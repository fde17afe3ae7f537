"""The dashboard shows each application's target and healthy replicas from Ray Serve's
own series; the check refuses a panel that lost either, or reads another series."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tribunal_lab")

from tribunal_lab.k8s_checks import (
    DASHBOARD,
    REPLICA_METRICS,
    REPLICA_PANEL,
    CheckFailedError,
    check_replica_panel,
    replica_series,
)


def test_the_replicas_panel_shows_target_and_healthy_replicas_per_application() -> None:
    lines = replica_series()
    assert {kind: line.metric for kind, line in lines.items()} == {
        "target": "ray_serve_autoscaling_target_replicas",
        "healthy": "ray_serve_deployment_replica_healthy",
    }
    assert {kind: line.aggregation for kind, line in lines.items()} == {
        "target": "max",
        "healthy": "sum",
    }
    assert check_replica_panel() == [
        f"dashboard: {REPLICA_PANEL!r} shows per application target "
        f"({REPLICA_METRICS['target']}), healthy ({REPLICA_METRICS['healthy']})"
    ]


def _board(tmp_path: Path, old: str, new: str) -> Path:
    text = DASHBOARD.read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / "tribunal.json"
    path.write_text(text.replace(old, new), encoding="utf-8")
    json.loads(path.read_text(encoding="utf-8"))  # still a dashboard
    return path


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (
            "ray_serve_autoscaling_target_replicas{",
            "ray_serve_num_deployment_replicas{",
            "target: reads ray_serve_num_deployment_replicas, not "
            "ray_serve_autoscaling_target_replicas",
        ),
        (
            "sum by (application) (ray_serve_deployment_replica_healthy",
            "sum(ray_serve_deployment_replica_healthy",
            "healthy: not one line per application",
        ),
        ('"legendFormat": "target {{application}}"', '"legendFormat": "goal"', "no line 'target'"),
        ('"title": "Replicas per service"', '"title": "Replicas"', "no panel"),
    ],
)
def test_the_check_refuses_a_replicas_panel_without_both_lines(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    with pytest.raises(CheckFailedError, match=message):
        check_replica_panel(_board(tmp_path, old, new))
