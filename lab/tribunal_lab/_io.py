"""Reading the JSONL files the lab uses: data sets and their resumable per-item caches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tribunal.core import jsonl_rows

__all__ = ["read_jsonl"]


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSONL file, blank lines skipped."""
    for row in jsonl_rows(path):
        yield row.value
