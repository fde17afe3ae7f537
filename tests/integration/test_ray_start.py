"""Starting a local Ray node on a busy machine: a node that did not come up in time is
started once more, and a failed start leaves none of its processes running."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import psutil  # type: ignore[import-untyped]
import pytest
from tribunal.deploy import start_ray_node

pytestmark = pytest.mark.ray


def _node_options(temp_dir: Path) -> dict[str, object]:
    return {
        "num_cpus": 1,
        "include_dashboard": False,
        "_temp_dir": str(temp_dir),
        "_node_ip_address": "127.0.0.1",
        "logging_level": "WARNING",
    }


def _children() -> dict[int, str]:
    found = {}
    for child in psutil.Process().children(recursive=True):
        try:
            found[child.pid] = " ".join(child.cmdline())
        except psutil.Error:
            continue
    return found


def test_a_head_that_misses_its_wait_is_started_again_and_leaves_no_process(
    ray_temp_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # No GCS publishes its port within 0 s: both starts run out of time, for real.
    monkeypatch.setenv("RAY_gcs_server_port_wait_time_s", "0")
    before = _children()
    with (
        caplog.at_level(logging.WARNING, logger="tribunal.deploy"),
        pytest.raises(RuntimeError, match="Timed out waiting for file"),
    ):
        start_ray_node(**_node_options(ray_temp_dir))

    retries = [r for r in caplog.records if "starting it again" in r.getMessage()]
    assert len(retries) == 1
    left = {pid: cmd for pid, cmd in _children().items() if pid not in before}
    assert left == {}, f"a failed start left processes running: {left}"


def test_the_head_gets_120_s_unless_the_operator_set_the_wait(
    ray_temp_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    monkeypatch.delenv("RAY_gcs_server_port_wait_time_s", raising=False)
    start_ray_node(**_node_options(ray_temp_dir))
    try:
        assert os.environ["RAY_gcs_server_port_wait_time_s"] == "120"  # noqa: SIM112 (Ray's)
        assert ray.get(ray.put("up")) == "up"
    finally:
        ray.shutdown()

    monkeypatch.setenv("RAY_gcs_server_port_wait_time_s", "300")
    start_ray_node(**_node_options(ray_temp_dir))
    try:
        assert os.environ["RAY_gcs_server_port_wait_time_s"] == "300"  # noqa: SIM112 (Ray's)
    finally:
        ray.shutdown()


def test_a_start_refused_beside_a_running_ray_leaves_that_ray_running(
    ray_temp_dir: Path,
) -> None:
    import ray

    start_ray_node(**_node_options(ray_temp_dir))
    try:
        with pytest.raises(RuntimeError, match=r"ray\.init twice"):
            start_ray_node(**_node_options(ray_temp_dir))
        assert ray.is_initialized()
        assert ray.get(ray.put("still up")) == "still up"
    finally:
        ray.shutdown()
