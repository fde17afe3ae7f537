"""Re-certify a stricter threshold of the *served* calibrator on its audited ACCEPTs.

After a shift, the live bound shows that the served threshold λ_s no longer keeps the
rate of wrong answers among the accepted ones at α. Refitting a calibrator on the audited
sample (:mod:`._weighted`) lets it accept former FALLBACKs, and then the few, heavily
weighted fallback labels decide the certificate. This module answers a narrower
question with every ACCEPT label at full weight: *which threshold λ ≥ λ_s of the served
calibrator keeps the rate at α on traffic like the audited window?*

**Why only the ACCEPT stratum matters.** On the served calibrator's scale a threshold
λ ≥ λ_s accepts a query only if its served confidence is ≥ λ ≥ λ_s, i.e. only a query
that was an ACCEPT. So the rate r(λ) = P(wrong | c ≥ λ) on the traffic is a property of
the ACCEPT stratum alone, and the FALLBACK stratum — whatever its share and its labels —
contributes nothing to it. This is exact, not an approximation: it holds for every query
of the traffic, because the scale is the one the decisions were made on.

**Why the audited ACCEPTs are a valid sample of it.** Live queries are i.i.d. (the
assumption of every certificate); each ACCEPT is audited by a coin of probability π
independent of whether its answer is right. With one share for every ACCEPT the audited
ACCEPTs are i.i.d. from the traffic conditioned on c ≥ λ_s, and any method of
:mod:`._risk_control` certifies on them as on a calibration file (Clopper–Pearson by
default: exact binomial tails, no weights). With confidence strata (``audit.accept_strata``)
the ACCEPTs were audited at several shares: the caller passes u = π_floor / π with π_floor
the smallest share *among ACCEPTs*, and the weighted betting test of :mod:`._weighted`
certifies.

**The threshold and the grid.** The method fixes its grid and start on a seeded 30% of the
items (the plan), never on the certify items, and runs its fixed sequence. A grid point
below λ_s accepts every audited item — the same statistic, and the same hypothesis, as
λ_s itself (no audited item is below it) — so a certified point below λ_s certifies λ_s,
and the returned threshold is never below it.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..core import InvalidArgumentError
from ..core.settings import DEFAULT_RISK_METHOD
from ._risk_control import select_threshold
from ._risk_plan import Labelled
from ._threshold import RiskThreshold, _rate
from ._weighted import weighted_threshold, weights_of

__all__ = ["served_threshold"]


def served_threshold(
    confidence: ArrayLike,
    correct: ArrayLike,
    weight: ArrayLike | None = None,
    *,
    served: float,
    alpha: float,
    delta: float,
    method: str = DEFAULT_RISK_METHOD,
) -> RiskThreshold:
    """The lowest threshold λ ≥ ``served`` of the served calibrator certified on its
    audited ACCEPTs (served confidences and reviewers' verdicts); threshold None when
    none is. ``weight``: u = π_floor / π per item, π_floor the smallest ACCEPT share;
    None or all equal: the sample is uniform and ``method`` certifies it.

    Raises:
        InvalidArgumentError: α or δ outside (0, 1), a served threshold outside [0, 1],
            bad arrays, or an item below the served threshold (not an ACCEPT).
    """
    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    if not (np.isfinite(served) and 0.0 <= served <= 1.0):
        raise InvalidArgumentError(
            f"served threshold {served}: give the served calibrator's threshold in [0, 1]",
            field="served",
        )
    items = Labelled.of(confidence, correct)
    if (items.confidence < served).any():
        raise InvalidArgumentError(
            f"{int((items.confidence < served).sum())} items have a served confidence below "
            f"the served threshold {served}: give the audited ACCEPTs only",
            field="confidence",
        )
    weights = None if weight is None else weights_of(weight, items.n)
    if weights is None or np.all(weights == weights[0]):
        chosen = select_threshold(
            items.confidence, items.correct, alpha=alpha, delta=delta, method=method
        )
    else:
        chosen = weighted_threshold(
            items.confidence, items.correct, weights, alpha=alpha, delta=delta
        )
    if chosen.threshold is None or chosen.threshold >= served:
        return chosen
    return RiskThreshold(
        chosen.alpha,
        chosen.delta,
        float(served),
        chosen.accepted,
        chosen.errors,
        chosen.upper_bound,
        chosen.n,
        chosen.method,
    )
