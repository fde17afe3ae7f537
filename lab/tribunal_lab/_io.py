"""Reading the JSONL files the lab uses: data sets and their resumable per-item caches."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["read_jsonl"]


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSONL file, blank lines skipped."""
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)
