"""Fixed-sequence Clopper–Pearson: the lowest threshold whose exact binomial bound is ≤ α.

**Guarantee.** If the calibration items and future traffic are exchangeable
(drawn i.i.d. from one distribution) and the calibrator was not fitted on the
calibration items, then with probability ≥ 1 − δ over the calibration draw the
returned threshold λ̂ satisfies P(wrong | confidence ≥ λ̂) ≤ α on future traffic.

**How.** Every distinct calibration confidence is a candidate threshold. They
are tested from the highest down, each as the hypothesis "accepting at this
threshold has a hallucination rate above α", rejected when the one-sided
(1 − δ) Clopper–Pearson upper bound on errors / accepted is ≤ α. The scan stops
at the first threshold that is not rejected. Because the order is fixed before
any label is read and nothing after a failure is tested (fixed-sequence
testing), the family-wise error stays at δ: with probability ≥ 1 − δ every
threshold passed on the way down — the returned one included — really has a
rate ≤ α. Scanning on past a failure and keeping a later pass would lose that.

Thresholds accepting fewer than :func:`~tribunal.confidence.min_accepted_for`
items are skipped: no labels could make them pass, and their counts depend on
the confidences only, so skipping them reads no label.

The scan tests every distinct value, so one unlucky error among the most
confident items ends it; :mod:`._learn_then_test` tests a coarser grid.
"""

from __future__ import annotations

from numpy.typing import ArrayLike

from ._threshold import (
    AcceptanceCurve,
    RiskThreshold,
    _rate,
    clopper_pearson_upper,
    min_accepted_for,
)

__all__ = ["METHOD", "select_risk_threshold"]

METHOD = "clopper-pearson"


def select_risk_threshold(
    confidence: ArrayLike, correct: ArrayLike, *, alpha: float, delta: float
) -> RiskThreshold:
    """The lowest threshold whose Clopper–Pearson upper bound on P(wrong | accepted) is ≤ α,
    scanned in fixed sequence over every distinct confidence (see the module docstring).

    ``correct`` holds 1 for a right answer, 0 for a wrong one. The guarantee needs
    confidences from a calibrator that was *not* fitted on these items.
    """
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    curve = AcceptanceCurve.of(confidence, correct)
    floor = min_accepted_for(alpha, delta)
    chosen = RiskThreshold(alpha, delta, None, 0, 0, None, curve.n, METHOD)
    for threshold, accepted, errors in zip(
        curve.thresholds, curve.accepted, curve.errors, strict=True
    ):
        if accepted < floor:
            continue
        bound = clopper_pearson_upper(int(errors), int(accepted), delta)
        if bound > alpha:
            break
        chosen = RiskThreshold(
            alpha, delta, float(threshold), int(accepted), int(errors), bound, curve.n, METHOD
        )
    return chosen
