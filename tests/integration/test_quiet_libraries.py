"""The model libraries' warnings and progress bars are hidden unless asked for
(`tribunal --verbose`): a real model load prints its "Loading weights" bar before
``quiet_third_party`` and nothing after."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_CHILD = """
import sys
from tribunal.core import load_embedder, load_settings, quiet_third_party
settings = load_settings("tiny")
load_embedder(settings, "embedder")
print("=== quiet from here", file=sys.stderr, flush=True)
quiet_third_party()
load_embedder(settings, "embedder")
"""


@pytest.mark.models
def test_a_model_load_prints_no_bar_once_quiet() -> None:
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TRANSFORMERS_VERBOSITY", "HF_HUB_DISABLE_PROGRESS_BARS")
    }
    done = subprocess.run(
        [sys.executable, "-c", _CHILD],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    before, after = done.stderr.split("=== quiet from here")
    assert "Loading weights" in before  # what every command printed
    assert "Loading weights" not in after
    assert "loss_type" not in after
    assert after.strip() == ""
