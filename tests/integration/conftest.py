"""Fixtures of the integration tests (real models, real servers, real Ray)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import REPO


@pytest.fixture
def ray_temp_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment and temp dir (.build/ray) of a throwaway Ray this test starts.

    Ray 2.60 turns on token auth for a new local cluster unless RAY_AUTH_MODE is set;
    these clusters are loopback-only, so they run without (and write no
    ~/.ray/auth_token). Start them with :func:`tribunal.deploy.start_ray_node`, which
    waits for a head slowed by the other tests' model loading.
    """
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    temp_dir = REPO / ".build" / "ray"
    temp_dir.mkdir(parents=True, exist_ok=True)
    return temp_dir


@pytest.fixture
def local_ray(ray_temp_dir: Path) -> Iterator[None]:
    """A single-node Ray for this test only, temp files in .build/ray, shut down after."""
    import ray
    from ray import serve
    from tribunal.deploy import start_ray_node

    start_ray_node(
        num_cpus=2,
        include_dashboard=False,
        _temp_dir=str(ray_temp_dir),
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


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL database at 127.0.0.1:5432 for one test, dropped after."""
    import uuid

    import psycopg

    name = f"tribunal_test_{uuid.uuid4().hex[:12]}"
    admin = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """The same test on SQLite (the embedded default) and on a real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/tribunal.db"
    url: str = request.getfixturevalue("postgres_url")
    return url
