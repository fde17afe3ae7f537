"""The suite's own guards: a test process that hangs after its last test exits anyway."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO

HANGING_TEST = """
import threading
import time


def test_leaves_a_thread_that_never_ends():
    # Not a daemon: the interpreter waits for it at exit, forever.
    threading.Thread(target=time.sleep, args=(3600,), name="never-ends").start()
"""


def test_a_process_hanging_after_its_session_exits_with_its_tracebacks(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_sessionfinish\n")
    (tmp_path / "test_hang.py").write_text(HANGING_TEST)
    env = {**os.environ, "PYTHONPATH": str(REPO), "TRIBUNAL_TEST_EXIT_GRACE_S": "2"}
    started = time.monotonic()
    finished = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert "1 passed" in finished.stdout
    assert finished.returncode == 1
    assert "Timeout (0:00:02)!" in finished.stderr
    # The main thread's traceback: waiting at exit for the thread that never ends.
    assert "in _shutdown" in finished.stderr
    assert elapsed < 60
