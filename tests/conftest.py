"""Shared fixtures: settings on the real model cache, a scratch data dir."""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tribunal.core import Settings, load_settings
from tribunal.core.models import ModelStore, get_artifact

REPO = Path(__file__).resolve().parents[1]
# The shared data sets live beside the repository (../shared); a clone elsewhere finds
# them through TRIBUNAL_SHARED_DIR or the workplace's fixed location.
SHARED = next(
    (
        path
        for path in (
            Path(os.environ.get("TRIBUNAL_SHARED_DIR", REPO.parent / "shared")),
            REPO.parent / "shared",
            Path("/work/shared"),
        )
        if (path / "data").is_dir()
    ),
    REPO.parent / "shared",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """How pytest-xdist (``make test``: two processes, ``--dist loadgroup``) shares tests.

    - Tests that start a Ray run one at a time on one worker: two local clusters at once
      would fight over the CPUs, the Ray temp dir and the auth token file, and each start
      would take twice as long.
    - Every other test runs on the worker that runs the rest of its module: a module's
      shared fixtures (a server, a loaded model) are built once, not once per worker, and
      two workers never hold the same module's models at once (two copies of the 1.5B
      LLM in float32 and their neighbours outgrew 24 GB).
    """
    for item in items:
        if item.get_closest_marker("ray") or "local_ray" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))


@pytest.fixture(scope="module", autouse=True)
def _release_llm_engines() -> Iterator[None]:
    """Each test module's LLM engines are freed when it ends: engines are shared per
    (model, LLM settings), so a worker that ran many modules would otherwise hold one
    copy of a model per settings it saw (the 1.5B model is ~6 GB in float32) and two
    workers together outgrow the machine's memory."""
    yield
    llm = sys.modules.get("tribunal.core.llm")
    if llm is not None and llm.release_shared_engines():
        gc.collect()


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's TRIBUNAL_* variables, except the model cache."""
    for key in list(os.environ):
        if key.startswith("TRIBUNAL_") and key != "TRIBUNAL_MODEL_DIR":
            monkeypatch.delenv(key)
    monkeypatch.setenv("TRIBUNAL_DATA_DIR", str(tmp_path / "data"))


@pytest.fixture
def tiny_settings() -> Settings:
    """The tiny profile on the real model cache; skips nothing: a missing model fails loudly."""
    settings = load_settings("tiny", server={"port": 0, "metrics_port": None})
    store = ModelStore(settings.model_dir, progress=False)
    missing = [
        spec.artifact
        for spec in settings.models.values()
        if spec.artifact
        and not get_artifact(spec.artifact).optional
        and store.status(get_artifact(spec.artifact)) != "installed"
    ]
    assert not missing, f"models not installed: {missing}; run `make models`"
    return settings
