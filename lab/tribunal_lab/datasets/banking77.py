"""BANKING77 (``banking77/train.jsonl``, ``test.jsonl``): user queries with their intent."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any, NamedTuple

from tribunal.core import jsonl_rows

__all__ = ["Banking77", "read_banking77"]


class Banking77(NamedTuple):
    train: list[dict[str, Any]]
    """The train split's rows (``query``, ``intent``), in file order."""
    test: list[dict[str, Any]]
    """The test split's rows, in file order."""
    by_intent: dict[str, list[str]]
    """Each intent's train queries, in file order."""


def read_banking77(folder: Path) -> Banking77:
    """Both splits of the BANKING77 folder, and the train queries grouped by intent."""
    train = [row.value for row in jsonl_rows(folder / "train.jsonl")]
    test = [row.value for row in jsonl_rows(folder / "test.jsonl")]
    by_intent: dict[str, list[str]] = defaultdict(list)
    for row in train:
        by_intent[row["intent"]].append(row["query"])
    return Banking77(train, test, dict(by_intent))
