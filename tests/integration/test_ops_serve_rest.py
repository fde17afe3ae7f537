"""`tribunal ops status|scale` on a real local Ray Serve, through its REST API.

A single-node Ray with its dashboard (the REST API lives there) runs a model-free
application deployed from a config, as `serve deploy` does; the CLI then reads it,
scales it to a fixed count, and back to an autoscaling range.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tribunal.cli import main
from tribunal.ops import ServeRestClient

from tests.conftest import REPO

# The kmock tests cover the ops logic in CI; this one adds the REST path on a real Ray.
pytestmark = [pytest.mark.ray, pytest.mark.slow, pytest.mark.extended]

_APP = {
    "name": "echo",
    "route_prefix": None,
    "import_path": "tests.integration._ops_echo_app:app",
    # Replicas import the app from the repository root.
    "runtime_env": {"env_vars": {"PYTHONPATH": str(REPO)}},
    "deployments": [{"name": "echo", "num_replicas": 1}],
}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def serve_rest(ray_temp_dir: Path) -> Iterator[ServeRestClient]:
    import ray
    from tribunal.deploy import start_ray_node

    port = _free_port()
    start_ray_node(
        num_cpus=2,
        include_dashboard=True,
        dashboard_host="127.0.0.1",
        dashboard_port=port,
        _temp_dir=str(ray_temp_dir),
        _node_ip_address="127.0.0.1",
        logging_level="WARNING",
    )
    try:
        client = ServeRestClient(f"http://127.0.0.1:{port}", timeout_s=60)
        deadline = time.monotonic() + 120
        while True:  # the dashboard starts after ray.init returns
            try:
                client.details()
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        client.apply(
            {
                "proxy_location": "Disabled",
                "http_options": {"host": "127.0.0.1", "port": _free_port()},
                "applications": [_APP],
            }
        )
        yield client
    finally:
        from ray import serve

        serve.shutdown()
        ray.shutdown()


def _wait(client: ServeRestClient, ready: Callable[[dict[str, Any]], bool], what: str) -> None:
    """Poll the echo deployment's details until ``ready`` holds (Serve applies asynchronously)."""
    deadline = time.monotonic() + 180
    deployment: dict[str, Any] = {}
    while time.monotonic() < deadline:
        app = client.details().get("applications", {}).get("echo") or {}
        deployment = (app.get("deployments") or {}).get("echo") or {}
        if app.get("status") == "RUNNING" and deployment and ready(deployment):
            return
        time.sleep(1)
    raise AssertionError(f"echo never had {what}: {deployment}")


def _running(deployment: dict[str, Any]) -> int:
    return sum(r.get("state") == "RUNNING" for r in deployment.get("replicas") or [])


def test_status_and_scale_through_the_rest_api(
    serve_rest: ServeRestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    target = ["--serve-address", serve_rest.address]
    _wait(serve_rest, lambda d: _running(d) == 1, "one running replica")
    assert main(["ops", "status", *target]) == 0
    table = capsys.readouterr().out
    assert "echo" in table
    assert "HEALTHY" in table

    assert main(["ops", "scale", "echo", "--replicas", "2", *target]) == 0
    out = capsys.readouterr().out
    assert "-    num_replicas: 1" in out
    assert "+    num_replicas: 2" in out
    # Serve took the new count (replicas start in the background; not waited for).
    _wait(serve_rest, lambda d: d.get("target_num_replicas") == 2, "a target of 2 replicas")

    # Back to autoscaling: a range replaces the fixed count.
    assert main(["ops", "scale", "echo", "--min", "1", "--max", "3", *target]) == 0
    capsys.readouterr()
    _wait(
        serve_rest,
        lambda d: (
            (d.get("deployment_config") or {}).get("autoscaling_config", {}).get("max_replicas")
            == 3
        ),
        "autoscaling up to 3",
    )
    assert main(["ops", "status", *target]) == 0
    assert "1..3" in capsys.readouterr().out

    assert main(["ops", "scale", "nope", "--replicas", "1", *target]) == 2
    assert "no application 'nope'" in capsys.readouterr().err
