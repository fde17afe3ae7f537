"""The suite's own guards: a test process that hangs after its last test exits anyway, and
a test that pytest-xdist runs outside its group fails, saying so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

HANGING_TEST = """
import threading
import time


def test_leaves_a_thread_that_never_ends():
    # Not a daemon: the interpreter waits for it at exit, forever.
    threading.Thread(target=time.sleep, args=(3600,), name="never-ends").start()
"""


def _pytest(folder: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest in its own process on ``folder``, whose conftest takes hooks of the suite's."""
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args, str(folder)],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_process_hanging_after_its_session_exits_with_its_tracebacks(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_sessionfinish\n")
    (tmp_path / "test_hang.py").write_text(HANGING_TEST)
    started = time.monotonic()
    finished = _pytest(tmp_path, TRIBUNAL_TEST_EXIT_GRACE_S="2")
    elapsed = time.monotonic() - started
    assert "1 passed" in finished.stdout
    assert finished.returncode == 1
    assert "Timeout (0:00:02)!" in finished.stderr
    # The main thread's traceback: waiting at exit for the thread that never ends.
    assert "in _shutdown" in finished.stderr
    assert elapsed < 60


@pytest.mark.parametrize(
    ("hooks", "outcome"),
    [
        ("pytest_runtest_setup", "2 errors"),
        ("pytest_collection_modifyitems, pytest_runtest_setup", "2 passed"),
    ],
)
def test_a_test_outside_its_xdist_group_fails_saying_so(
    tmp_path: Path, hooks: str, outcome: str
) -> None:
    (tmp_path / "conftest.py").write_text(f"from tests.conftest import {hooks}\n")
    (tmp_path / "test_two.py").write_text(
        "def test_one():\n    pass\n\n\ndef test_two():\n    pass\n"
    )
    finished = _pytest(tmp_path, "-n", "2", "--dist", "loadgroup")
    assert outcome in finished.stdout
    if outcome == "2 errors":
        # Each fails at set-up, saying why and where to look.
        assert "test_two.py::test_one runs without its xdist group: the group marks" in (
            finished.stdout
        )
