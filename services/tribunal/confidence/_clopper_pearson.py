"""Fixed-sequence Clopper–Pearson: from a planned start, down every distinct certify confidence.

**How.** The start λ_s is chosen on the plan (:mod:`._risk_plan`: the calibrator's fit
queries in ``tribunal calibrate``, else a seeded 30% of the items handed in), never on
the certify items. The scan tests "accepting at λ has a hallucination rate above α" at
λ_s, then at every distinct certify confidence below it, highest first, rejecting when
the one-sided (1 − δ) Clopper–Pearson upper bound on errors / accepted is ≤ α. It stops
at the first threshold that is not rejected and returns the lowest one rejected.

**Guarantee.** If the certify items and future traffic are exchangeable (i.i.d. from
one distribution) and neither the calibrator nor the plan used the certify items, then
with probability ≥ 1 − δ over the certify draw the returned λ̂ satisfies
P(wrong | confidence ≥ λ̂) ≤ α on future traffic.

*Why, although the tested thresholds are the certify items' own values.* Read the scan
as one over *every* λ ≤ λ_s, descending: between two consecutive certify confidences
c' < c the accepted set {confidence ≥ λ} is that of c, so passing c passes all of (c', c],
and the values between λ_s and the first confidence below it share λ_s's test. Let λ* be
the highest λ ≤ λ_s with a rate above α — a constant given the plan. A scan that passed
any such λ passed the whole interval down to it, λ* included (or, when the supremum is
not attained, a sequence of nulls rising to it, and Fatou's lemma gives the same bound).
At the fixed λ*, the errors among the n certify items accepted are Binomial(n, r(λ*))
given n, so the bound passes with probability ≤ δ. Hence a false pass anywhere has
probability ≤ δ. No monotonicity of the rate in λ is assumed.

*Why the start must not come from the certify items.* Starting at "the first value that
accepts enough items to pass" reads the certify confidences: λ* may then lie above the
start, skipped, and the first null actually tested is a random order statistic at which
the errors are no longer binomial. (When the items just under the start are less often
wrong than those above it, the pass probability there exceeds δ.) Hence the plan.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from ._learn_then_test import binomial_p_value
from ._risk_plan import DEFAULT_GRID_STEP, plan_and_test, plan_grid, plan_start
from ._threshold import AcceptanceCurve, RiskThreshold, _rate, clopper_pearson_upper

__all__ = ["METHOD", "select_risk_threshold"]

METHOD = "clopper-pearson"


def select_risk_threshold(
    confidence: ArrayLike,
    correct: ArrayLike,
    *,
    alpha: float,
    delta: float,
    plan: tuple[ArrayLike, ArrayLike] | None = None,
) -> RiskThreshold:
    """The lowest threshold the planned fixed-sequence Clopper–Pearson scan certifies
    (see the module docstring); threshold None when none is.

    ``correct`` holds 1 for a right answer, 0 for a wrong one. ``plan``: confidences and
    labels of items independent of these; without it a seeded 30% of the items plan.
    The guarantee needs confidences from a calibrator that was *not* fitted on the
    certify items.
    """
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    planned, tested = plan_and_test(confidence, correct, plan)
    grid = plan_grid(planned, DEFAULT_GRID_STEP)
    chosen = RiskThreshold(alpha, delta, None, 0, 0, None, tested.n, METHOD)
    if not grid.size:
        return chosen
    start = float(
        grid[plan_start(planned, grid, tested.n, alpha=alpha, delta=delta, test=binomial_p_value)]
    )
    # The bound is ≤ α exactly when the binomial p-value is ≤ δ (one vectorised cdf).
    curve = AcceptanceCurve.of(tested.confidence, tested.correct)
    below = curve.thresholds < start
    first_accepted, first_errors = curve.at(start)
    thresholds = np.concatenate([[start], curve.thresholds[below]])
    accepted = np.concatenate([[first_accepted], curve.accepted[below]])
    errors = np.concatenate([[first_errors], curve.errors[below]])
    failed = np.flatnonzero(stats.binom.cdf(errors, accepted, alpha) > delta)
    passed = int(failed[0]) if failed.size else int(thresholds.size)
    if passed == 0:
        return chosen
    last = passed - 1
    bound = clopper_pearson_upper(int(errors[last]), int(accepted[last]), delta)
    return RiskThreshold(
        alpha,
        delta,
        float(thresholds[last]),
        int(accepted[last]),
        int(errors[last]),
        bound,
        tested.n,
        METHOD,
    )
