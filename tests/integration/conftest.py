"""Fixtures of the integration tests (real models, real servers, real Ray)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.conftest import REPO


@pytest.fixture
def local_ray(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A single-node Ray for this test only, temp files in .build/ray, shut down after."""
    import ray
    from ray import serve

    # Ray 2.60 turns on token auth for a new local cluster unless RAY_AUTH_MODE is
    # set; this throwaway cluster is loopback-only, so it runs without (and writes
    # no ~/.ray/auth_token).
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    temp_dir = REPO / ".build" / "ray"
    temp_dir.mkdir(parents=True, exist_ok=True)
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(temp_dir),
        _node_ip_address="127.0.0.1",
        logging_level="WARNING",
        runtime_env={"env_vars": {"TRIBUNAL_DATA_DIR": os.environ["TRIBUNAL_DATA_DIR"]}},
    )
    try:
        serve.start(proxy_location="Disabled")
        yield
    finally:
        serve.shutdown()
        ray.shutdown()
