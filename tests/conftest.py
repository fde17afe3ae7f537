"""Shared fixtures: settings on the real model cache, a scratch data dir."""

from __future__ import annotations

import faulthandler
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


# First: pytest-xdist's own hook reads the ``xdist_group`` marks into each test's id
# (``nodeid@group``) as the tests are collected; marks added after it are ignored, and every
# test becomes a group of its own.
@pytest.hookimpl(tryfirst=True)
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


def _resident_mib() -> tuple[float, float, float]:
    """This process's resident memory now, the anonymous part of it (not mapped files such
    as llama.cpp's model weights), and its peak so far, in MiB (Linux's /proc)."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    resident, anonymous, peak = (
        int(fields[key].split()[0]) / 1024 for key in ("VmRSS", "RssAnon", "VmHWM")
    )
    return resident, anonymous, peak


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """With TRIBUNAL_TEST_MEMORY_LOG=DIR, each worker appends one line per test to
    DIR/<worker>.tsv: the test, its resident memory before and after, the anonymous part
    after, and the worker's peak after it (MiB). This is how a test that grows a worker
    towards the machine's limit is found."""
    log_dir = os.environ.get("TRIBUNAL_TEST_MEMORY_LOG")
    before = _resident_mib()[0] if log_dir else 0.0
    yield
    if log_dir:
        after, anonymous, peak = _resident_mib()
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        with open(Path(log_dir) / f"{worker}.tsv", "a") as log:
            log.write(f"{item.nodeid}\t{before:.0f}\t{after:.0f}\t{anonymous:.0f}\t{peak:.0f}\n")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Under ``--dist loadgroup`` every test must carry its group in its id, or the groups
    above silently stop holding (two Ray clusters at once, two copies of a module's
    models): such a test fails, saying so."""
    if getattr(item.config.option, "loadgroup", False) and "@" not in item.nodeid:
        pytest.fail(
            f"{item.nodeid} runs without its xdist group: the group marks must be added "
            "before pytest-xdist reads them (tests/conftest.py), with a pytest that "
            "pytest-xdist's groups work with (pyproject.toml)",
            pytrace=False,
        )


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """A test process that hangs on its way out, after its last test (a Ray driver's exit
    handler waiting on a cluster that died with another process, a thread that never
    ends), would hold ``make test`` until CI's own limit, past every test's timeout. If it
    has not exited TRIBUNAL_TEST_EXIT_GRACE_S seconds (default 120) after its session
    ended, the tracebacks of its threads go to stderr and it exits with status 1."""
    grace = float(os.environ.get("TRIBUNAL_TEST_EXIT_GRACE_S", "120"))
    # faulthandler's watchdog is a C thread: it fires even while Python code is blocked.
    faulthandler.dump_traceback_later(grace, exit=True, file=sys.__stderr__)


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
