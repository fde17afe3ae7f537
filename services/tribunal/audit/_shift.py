"""A shift warning: does live traffic still look like the calibration traffic?

The acceptance rate can stay put while the traffic changes under it (more out-of-scope
questions that look in scope, harder paraphrases). This compares the *distributions* of
the signals the decision rests on — the served confidence (the best candidate's) and the
top-1 similarity (the highest dense cosine among the candidates: low when a query is out
of scope) — in a window of live decisions with the reference sample the calibration
artifact keeps of its calibration traffic, by two-sample Kolmogorov–Smirnov tests
(scipy), Bonferroni-corrected over the signals compared. A warning says the calibration
certificate's assumption (exchangeability) is in doubt; it proves nothing about the error
rate — the live bound does that.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["MIN_LIVE", "MIN_SAMPLE", "SHIFT_SIGNALS", "ShiftResult", "shift_test"]

SHIFT_SIGNALS: tuple[str, ...] = ("confidence", "top1_similarity")
MIN_SAMPLE = 20
"""Fewer reference values than this: that signal is not tested."""
MIN_LIVE = 100
"""Fewer live values than this: not tested (a few dozen answers swing too much to warn on:
the test is repeated after every review)."""


@dataclass(frozen=True)
class ShiftResult:
    p_values: dict[str, float]
    """Per signal tested: the Bonferroni-adjusted KS p-value."""
    statistics: dict[str, float]
    """Per signal tested: the KS statistic (largest gap between the two CDFs)."""
    live_n: dict[str, int]
    level: float

    @property
    def p_value(self) -> float | None:
        """The smallest adjusted p-value; None when nothing could be tested."""
        return min(self.p_values.values()) if self.p_values else None

    @property
    def warning(self) -> bool:
        return self.p_value is not None and self.p_value < self.level

    def to_json(self) -> dict[str, object]:
        return {
            "p_value": self.p_value,
            "warning": self.warning,
            "level": self.level,
            "p_values": {k: round(v, 6) for k, v in self.p_values.items()},
            "ks_statistics": {k: round(v, 4) for k, v in self.statistics.items()},
            "live_n": self.live_n,
        }


def shift_test(
    reference: Mapping[str, Sequence[float]],
    live: Mapping[str, Sequence[float]],
    *,
    level: float = 0.01,
) -> ShiftResult:
    """KS test per signal present on both sides with enough values."""
    from scipy import stats

    tested = [
        name
        for name in SHIFT_SIGNALS
        if len(reference.get(name, ())) >= MIN_SAMPLE and len(live.get(name, ())) >= MIN_LIVE
    ]
    p_values: dict[str, float] = {}
    statistics: dict[str, float] = {}
    for name in tested:
        result = stats.ks_2samp(
            np.asarray(reference[name], dtype=float), np.asarray(live[name], dtype=float)
        )
        p_values[name] = min(1.0, float(result.pvalue) * len(tested))
        statistics[name] = float(result.statistic)
    return ShiftResult(
        p_values=p_values,
        statistics=statistics,
        live_n={name: len(live.get(name, ())) for name in tested},
        level=level,
    )
