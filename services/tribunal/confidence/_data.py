"""Labelled signals on disk (JSONL) and the seeded fit / risk / held-out split.

One row per line: ``{"signals": {...proto Signals field names...}, "label": 0|1}``,
label 1 meaning the candidate is a correct answer. Other keys (ids, texts) are
kept out of the way and ignored.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core import InvalidArgumentError, NotFoundError, jsonl_rows
from ._signals import Signals

__all__ = [
    "LabelledSignals",
    "Split",
    "read_labelled_signals",
    "split_rows",
    "write_labelled_signals",
]


@dataclass(frozen=True)
class LabelledSignals:
    """Signals with their labels, and the hash of the file they came from."""

    signals: tuple[Signals, ...]
    labels: NDArray[np.int64]
    """1 = the candidate is a correct answer."""
    sha256: str
    """sha256 of the file's bytes (empty when built in memory)."""
    source: str = ""
    """Where the rows came from (a path)."""

    def __len__(self) -> int:
        return len(self.signals)

    def subset(self, index: NDArray[np.int64]) -> LabelledSignals:
        """The rows at ``index``, in that order."""
        return LabelledSignals(
            tuple(self.signals[i] for i in index), self.labels[index], self.sha256, self.source
        )


def read_labelled_signals(path: Path) -> LabelledSignals:
    """Read a JSONL file of labelled signals.

    Raises:
        NotFoundError: no such file.
        InvalidArgumentError: a bad line; the message gives the line number and
            ``field`` the signal at fault.
    """
    if not path.is_file():
        raise NotFoundError(f"data file {path} does not exist")
    signals: list[Signals] = []
    labels: list[int] = []
    for where, _, row in jsonl_rows(path, field="data"):
        if "signals" not in row or "label" not in row:
            raise InvalidArgumentError(
                f"{where}: each line needs 'signals' (an object) and 'label' (0 or 1)",
                field="data",
            )
        if row["label"] not in (0, 1) or isinstance(row["label"], bool):
            raise InvalidArgumentError(
                f"{where}: label must be 0 or 1, got {row['label']!r}", field="label"
            )
        try:
            signals.append(Signals.from_mapping(row["signals"]))
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{where}: {exc.message}", field=exc.field) from None
        labels.append(int(row["label"]))
    if not signals:
        raise InvalidArgumentError(f"{path} holds no rows", field="data")
    return LabelledSignals(
        tuple(signals),
        np.asarray(labels, dtype=np.int64),
        hashlib.sha256(path.read_bytes()).hexdigest(),
        str(path),
    )


def write_labelled_signals(
    path: Path, signals: Sequence[Signals], labels: Sequence[int], ids: Sequence[str] | None = None
) -> str:
    """Write rows as JSONL (sorted keys, so the same rows give the same bytes); returns sha256."""
    lines = []
    for index, (item, label) in enumerate(zip(signals, labels, strict=True)):
        row: dict[str, Any] = {"signals": item.to_mapping(), "label": int(label)}
        if ids is not None:
            row["id"] = ids[index]
        lines.append(json.dumps(row, sort_keys=True))
    data = ("\n".join(lines) + "\n").encode("utf-8")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return hashlib.sha256(data).hexdigest()


@dataclass(frozen=True)
class Split:
    """Row indices of each part; disjoint, together every row."""

    fit: NDArray[np.int64]
    """Rows the calibrator's parameters are fitted on."""
    risk: NDArray[np.int64]
    """Rows the thresholds are selected on (never seen by the calibrator)."""
    holdout: NDArray[np.int64]
    """Rows kept for evaluation only."""

    def sizes(self) -> dict[str, int]:
        return {
            "fit": int(self.fit.size),
            "risk": int(self.risk.size),
            "holdout": int(self.holdout.size),
        }


def split_rows(
    labels: NDArray[np.int64], *, holdout_fraction: float, risk_fraction: float, seed: int
) -> Split:
    """Stratified, seeded split: held-out first, then the rest into fit and risk parts.

    The calibration split is fit ∪ risk; the threshold's guarantee needs the
    risk rows kept away from the calibrator's fitting.

    Raises:
        InvalidArgumentError: too few rows of a class to split.
    """
    from sklearn.model_selection import train_test_split  # a fit-time need: see _calibrators

    rows = np.arange(labels.size)
    try:
        calibration, holdout = train_test_split(
            rows, test_size=holdout_fraction, random_state=seed, stratify=labels
        )
        fit, risk = train_test_split(
            calibration, test_size=risk_fraction, random_state=seed, stratify=labels[calibration]
        )
    except ValueError as exc:
        raise InvalidArgumentError(
            f"cannot split {labels.size} rows ({int(labels.sum())} correct): {exc}", field="data"
        ) from None
    return Split(np.sort(fit), np.sort(risk), np.sort(holdout))
