"""Selection with guaranteed risk (SGR; Geifman & El-Yaniv, NeurIPS 2017).

A binary search over the sorted calibration confidences: at each of
k = ⌈log2 m⌉ steps (m distinct confidences) the middle threshold's
selective risk gets a one-sided Clopper–Pearson bound at level δ / k; a bound
≤ α moves the search to lower thresholds (more coverage), otherwise to higher
ones. The lowest tested threshold whose bound is ≤ α is returned.

**Guarantee** (their Theorem): if the calibration items and future traffic are
exchangeable (i.i.d.) and the calibrator was not fitted on the calibration
items, then with probability ≥ 1 − δ the returned λ̂ satisfies
P(wrong | confidence ≥ λ̂) ≤ its bound ≤ α on future traffic. The union bound
over the k tested thresholds pays for the search (each test at δ / k), so SGR
can certify where a fixed-sequence scan stopped at an early error, but each of
its tests is stricter.
"""

from __future__ import annotations

import math

from numpy.typing import ArrayLike

from ._threshold import AcceptanceCurve, RiskThreshold, _rate, clopper_pearson_upper

__all__ = ["METHOD", "sgr_threshold"]

METHOD = "sgr"


def sgr_threshold(
    confidence: ArrayLike, correct: ArrayLike, *, alpha: float, delta: float
) -> RiskThreshold:
    """The lowest threshold SGR certifies at (α, δ); threshold None when none is."""
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    curve = AcceptanceCurve.of(confidence, correct)
    size = int(curve.thresholds.size)
    chosen = RiskThreshold(alpha, delta, None, 0, 0, None, curve.n, METHOD)
    steps = max(1, math.ceil(math.log2(size))) if size > 1 else 1
    level = delta / steps
    # Indices into the curve: 0 is the highest threshold (fewest accepted).
    low, high = 0, size - 1
    for _ in range(steps):
        middle = (low + high) // 2
        accepted, errors = int(curve.accepted[middle]), int(curve.errors[middle])
        bound = clopper_pearson_upper(errors, accepted, level)
        if bound <= alpha:
            if chosen.threshold is None or middle > _index(curve, chosen.threshold):
                chosen = RiskThreshold(
                    alpha,
                    delta,
                    float(curve.thresholds[middle]),
                    accepted,
                    errors,
                    bound,
                    curve.n,
                    METHOD,
                )
            low = middle + 1
        else:
            high = middle - 1
        if low > high:
            break
    return chosen


def _index(curve: AcceptanceCurve, threshold: float) -> int:
    return int((curve.thresholds >= threshold).sum()) - 1
