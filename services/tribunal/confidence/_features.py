"""Signals to feature vectors, with missing values kept apart from zeros.

A :class:`FeatureSpace` is fitted on training signals: it keeps the columns that
were present at least once, the judge and extra names it saw, and each column's
training mean and range. :meth:`FeatureSpace.raw` gives NaN where a signal is missing
and clamps a present value into the range its column had in training (recorded since
ranges were added; a calibrator never extrapolates beyond what it was fitted on);
:meth:`FeatureSpace.transform` imputes the mean and appends one missing-indicator
per column, so a missing entailment check and a check that returned 0 land on
different vectors.

Column names: the proto field name (``dense_score``), ``retrieval_reciprocal_rank``
(1/rank, so higher is better like every other score), ``judge_p_yes.<judge>``,
``extra.<name>``, and ``debate.<outcome>`` (one-hot).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core import InvalidArgumentError
from ._signals import SCALAR_FIELDS, DebateOutcome, Signals

__all__ = ["FeatureSpace", "signal_values"]

_FIXED_COLUMNS: tuple[str, ...] = (
    "retrieval_score",
    "retrieval_reciprocal_rank",
    "dense_score",
    "sparse_score",
    "ensemble_p_match",
    "ensemble_p_match_margin",
    "neighbour_vote",
    "entailment_p_entail",
    "entailment_p_contradict",
    "supporting_passages",
    *(f"debate.{outcome.value}" for outcome in DebateOutcome),
    "debate_rounds",
)
_JUDGE = "judge_p_yes."
_EXTRA = "extra."


def signal_values(signals: Signals) -> dict[str, float]:
    """The present signals as ``{column name: value}`` (missing ones absent)."""
    values: dict[str, float] = {}
    # The rank enters as its reciprocal, below.
    for name in (f for f in SCALAR_FIELDS if f != "retrieval_rank"):
        value = getattr(signals, name)
        if value is not None:
            values[name] = float(value)
    if signals.retrieval_rank is not None:
        values["retrieval_reciprocal_rank"] = 1.0 / signals.retrieval_rank
    if signals.debate is not None:
        for outcome in DebateOutcome:
            values[f"debate.{outcome.value}"] = float(signals.debate is outcome)
    values.update({_JUDGE + k: float(v) for k, v in signals.judge_p_yes.items()})
    values.update({_EXTRA + k: float(v) for k, v in signals.extra.items()})
    return values


@dataclass(frozen=True)
class FeatureSpace:
    """The columns a calibrator was fitted on, and how missing values are filled."""

    columns: tuple[str, ...]
    """Value columns, in a fixed order (schema fields, then judges, then extras, sorted)."""
    means: tuple[float, ...]
    """Training mean of each column over the rows where it was present (imputation value)."""
    judges: tuple[str, ...]
    """Judge names seen in training; any other judge name is refused."""
    extras: tuple[str, ...]
    """Extra signal names seen in training; any other name is refused."""
    lows: tuple[float, ...] | None = None
    """Smallest training value of each column; inputs below it are raised to it."""
    highs: tuple[float, ...] | None = None
    """Largest training value of each column; inputs above it are lowered to it. (None
    in artifacts fitted before ranges were recorded: nothing is clamped here.)"""

    @classmethod
    def fit(cls, signals: Sequence[Signals]) -> FeatureSpace:
        """Keep every column present at least once in ``signals``; remember its mean."""
        if not signals:
            raise InvalidArgumentError("cannot fit a feature space on no rows", field="data")
        rows = [signal_values(s) for s in signals]
        judges = sorted({k for s in signals for k in s.judge_p_yes})
        extras = sorted({k for s in signals for k in s.extra})
        candidates = [*_FIXED_COLUMNS, *(_JUDGE + j for j in judges), *(_EXTRA + e for e in extras)]
        columns, means, lows, highs = [], [], [], []
        for column in candidates:
            present = [row[column] for row in rows if column in row]
            if present:
                columns.append(column)
                means.append(float(np.mean(present)))
                lows.append(float(np.min(present)))
                highs.append(float(np.max(present)))
        return cls(
            tuple(columns),
            tuple(means),
            tuple(judges),
            tuple(extras),
            tuple(lows),
            tuple(highs),
        )

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Names of :meth:`transform`'s columns: the values, then ``missing.<column>``."""
        return (*self.columns, *(f"missing.{c}" for c in self.columns))

    def check_known(self, signals: Signals, where: str = "signals") -> None:
        """Refuse judge and extra names this space never saw (fixed fields are always known).

        Raises:
            InvalidArgumentError: ``field`` is e.g. ``signals.judge_p_yes[gpt]``.
        """
        for name in signals.judge_p_yes:
            if name not in self.judges:
                raise InvalidArgumentError(
                    f"judge {name!r} is not known to this calibrator "
                    f"(known: {', '.join(self.judges) or 'none'})",
                    field=f"{where}.judge_p_yes[{name}]",
                )
        for name in signals.extra:
            if name not in self.extras:
                raise InvalidArgumentError(
                    f"signal extra[{name!r}] is not known to this calibrator "
                    f"(known: {', '.join(self.extras) or 'none'})",
                    field=f"{where}.extra[{name}]",
                )

    def raw(self, signals: Sequence[Signals]) -> NDArray[np.float64]:
        """``(n, len(columns))`` values with NaN where a signal is missing.

        Signals the space has no column for (a fixed field never present in
        training) carry nothing the calibrator learnt, so they are dropped.
        """
        matrix = np.full((len(signals), len(self.columns)), np.nan)
        index = {c: i for i, c in enumerate(self.columns)}
        for row, item in enumerate(signals):
            self.check_known(item)
            for column, value in signal_values(item).items():
                if column in index:
                    matrix[row, index[column]] = value
        if self.lows is not None and self.highs is not None:
            # NaN (missing) stays NaN through np.clip.
            matrix = np.clip(matrix, np.asarray(self.lows), np.asarray(self.highs))
        return matrix

    def transform(self, signals: Sequence[Signals]) -> NDArray[np.float64]:
        """``(n, 2·len(columns))``: mean-imputed values, then 0/1 missing indicators."""
        raw = self.raw(signals)
        missing = np.isnan(raw)
        filled = np.where(missing, np.asarray(self.means), raw)
        return np.hstack([filled, missing.astype(np.float64)])

    def column(self, name: str) -> int:
        """Index of column ``name``.

        Raises:
            InvalidArgumentError: the training data never had that signal.
        """
        try:
            return self.columns.index(name)
        except ValueError:
            raise InvalidArgumentError(
                f"score signal {name!r} is not among the fitted columns "
                f"({', '.join(self.columns)})",
                field="score",
            ) from None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "columns": list(self.columns),
            "means": list(self.means),
            "judges": list(self.judges),
            "extras": list(self.extras),
        }
        if self.lows is not None and self.highs is not None:
            data["lows"], data["highs"] = list(self.lows), list(self.highs)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FeatureSpace:
        ranges = "lows" in data and "highs" in data
        return cls(
            tuple(data["columns"]),
            tuple(float(m) for m in data["means"]),
            tuple(data["judges"]),
            tuple(data["extras"]),
            tuple(float(v) for v in data["lows"]) if ranges else None,
            tuple(float(v) for v in data["highs"]) if ranges else None,
        )
