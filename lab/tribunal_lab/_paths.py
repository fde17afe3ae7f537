"""Where the lab reads its data sets and keeps its resumable per-item caches.

The product never reads either: its data lives in the settings' ``data_dir``. Both
defaults fit a checkout beside the shared data folder; the environment overrides them.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV", "DATA_ENV", "cache_dir", "data_root"]

DATA_ENV = "TRIBUNAL_LAB_DATA"
"""Environment variable naming the folder that holds the data sets (scifact, trec-dl, ...)."""
CACHE_ENV = "TRIBUNAL_LAB_CACHE"
"""Environment variable naming the folder of the lab's per-item caches."""


def data_root() -> Path:
    """The data sets folder: ``$TRIBUNAL_LAB_DATA``, else ``../shared/data``."""
    return Path(os.environ.get(DATA_ENV) or "../shared/data")


def cache_dir(name: str) -> Path:
    """The cache folder of one runner: ``$TRIBUNAL_LAB_CACHE/NAME``, else
    ``.build/lab-cache/NAME`` (never a committed folder: a rerun resumes from it)."""
    return Path(os.environ.get(CACHE_ENV) or ".build/lab-cache") / name
