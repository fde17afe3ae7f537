"""TREC run files for evaluation, ordered as trec_eval orders them.

``ir-measures``' reader accepts a malformed line silently or fails without naming the
line; the evaluation needs ``file:line`` errors and the ranking trec_eval (and so
ir-measures) evaluates — by score, descending, ties by docid descending, the rank column
ignored — so the run is parsed here. qrels are read by the label job's own reader
(:func:`._ir_inputs.read_qrels`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from ..core import InvalidArgumentError, NotFoundError

__all__ = ["MAX_RUN_LINES", "read_scored_run", "run_name"]

MAX_RUN_LINES = 5_000_000
"""A run file longer than this is refused (1,000 queries × 1,000 hits is 1 M lines)."""


def run_name(path: Path, taken: Mapping[str, object]) -> str:
    """The run's name: its file stem, made unique among ``taken``."""
    name, n = path.stem, 2
    while name in taken:
        name, n = f"{path.stem}-{n}", n + 1
    return name


def read_scored_run(path: Path) -> dict[str, list[str]]:
    """``qid -> docids`` best first from ``qid Q0 docid rank score tag`` lines."""
    if not path.is_file():
        raise NotFoundError(f"run file {path} does not exist")
    scored: dict[str, dict[str, float]] = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if number > MAX_RUN_LINES:
                raise InvalidArgumentError(f"{path}: more than {MAX_RUN_LINES} lines")
            if not line.strip():
                continue
            parts = line.split()
            where = f"{path}:{number}"
            if len(parts) != 6:
                raise InvalidArgumentError(
                    f"{where}: a run line is `qid Q0 docid rank score tag` (6 columns), "
                    f"got {len(parts)}"
                )
            qid, _, docid, rank, score, _tag = parts
            try:
                int(rank)
                value = float(score)
            except ValueError:
                raise InvalidArgumentError(
                    f"{where}: rank {rank!r} must be an integer and score {score!r} a number"
                ) from None
            if not math.isfinite(value):
                raise InvalidArgumentError(f"{where}: score {score!r} is not finite")
            hits = scored.setdefault(qid, {})
            if docid in hits:
                raise InvalidArgumentError(f"{where}: {docid} appears twice for query {qid}")
            hits[docid] = value
    if not scored:
        raise InvalidArgumentError(f"{path}: the run has no lines")
    return {
        qid: [
            docid
            for docid, _ in sorted(hits.items(), key=lambda hit: (hit[1], hit[0]), reverse=True)
        ]
        for qid, hits in scored.items()
    }
