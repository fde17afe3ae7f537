"""`make test` needs no sudo: without chromium the review page's browser test skips and
says why (a real pytest run of it); under CI's ``TRIBUNAL_REQUIRE_BROWSER=1`` it is not
skipped, so a missing chromium fails it."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The SQLite variant: the PostgreSQL one would only repeat the outcome.
BROWSER_TEST = (
    "tests/integration/test_review_browser.py::test_label_items_with_the_keyboard[sqlite]"
)


def _run(**env: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "TRIBUNAL_REQUIRE_BROWSER"}
    environment.update(env, CHROMIUM_EXECUTABLE="/nonexistent/chromium")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", BROWSER_TEST],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def test_the_browser_test_skips_with_its_reason_where_chromium_is_absent() -> None:
    done = _run()
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout
    assert "no chromium at /nonexistent/chromium" in done.stdout
    assert "`make browser`" in done.stdout


def test_ci_requires_the_browser_test_to_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under ``TRIBUNAL_REQUIRE_BROWSER=1`` the skip condition is off: a missing chromium
    fails the test's own check instead (read when the module is imported)."""
    from tests.integration import test_review_browser as module

    monkeypatch.setenv("CHROMIUM_EXECUTABLE", "/nonexistent/chromium")
    try:
        for required, skipped in (("", True), ("1", False)):
            monkeypatch.setenv("TRIBUNAL_REQUIRE_BROWSER", required)
            mark = importlib.reload(module).needs_chromium.mark
            assert mark.args == (skipped,)
            assert "no chromium at /nonexistent/chromium" in mark.kwargs["reason"]
    finally:
        monkeypatch.undo()
        importlib.reload(module)
