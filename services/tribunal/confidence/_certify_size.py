"""How many labelled queries a collection would need to certify an α it does not certify.

A calibration certifies a threshold for α when the risk-control method's upper bound on
the hallucination rate among the accepted certify queries is ≤ α. When none qualifies,
the question a user asks next is *how much more labelling would do it*. This module
answers it from the certify split's acceptance curve — at each distinct certify
confidence, highest first, how many queries it accepts and how many of those are wrong —
which :func:`~tribunal.confidence.calibrate` records in the artifact.

**The estimate.** At each point k of the curve (a_k accepted, e_k wrong, of n certify
queries) keep today's error rate r_k = e_k / a_k and coverage c_k = a_k / n. If r_k < α,
the fewest accepted queries A from which on the method's bound after ⌈r_k·A⌉ errors
(today's rate, never rounded in its favour) stays ≤ α is found by scanning A upward (the
bound is not monotone in A: it jumps each time the whole errors grow by one, so a count
that passes only by the luck of the rounding is not taken). The certify split then needs
m_k = ⌈A · n / a_k⌉ queries, and the collection ⌈m_k · N / n⌉ labelled queries in all,
N / n being how many labelled queries it takes today to put one in the certify split.
The estimate is the smallest over the curve's points (the *best threshold*).

The bound per method: the one-sided (1 − δ) Clopper–Pearson bound (scipy's beta
quantile) for ``clopper-pearson`` and ``ltt``; the same at δ / :data:`GRID_POINTS` for
``sgr`` (its union bound); the Hoeffding–Bentkus p-value ≤ δ for ``ltt-hb``.

**What it is not.** A promise: the rate and coverage are measured on today's certify
queries (few, so noisy), the best point is picked on them, and the fixed-sequence
methods may stop at a failure above it. More labelled queries also teach more phrasings
(``tribunal tune``), which usually lowers the error rate — then fewer would do.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import stats

from ..core import InvalidArgumentError
from ._learn_then_test import _hb_upper
from ._sgr import GRID_POINTS
from ._threshold import AcceptanceCurve, _rate, clopper_pearson_upper, min_accepted_for

__all__ = [
    "DEFAULT_LIMIT",
    "CertifyEstimate",
    "artifact_not_certified",
    "certify_curve",
    "estimate_from_artifact",
    "not_certified_message",
    "queries_to_certify",
]

DEFAULT_LIMIT = 1_000_000
"""Accepted queries beyond which a point is given up (its rate is too close to α)."""
_CHUNK = 4096


@dataclass(frozen=True)
class CertifyEstimate:
    """What certifying ``alpha`` would take, at today's error rate and coverage."""

    alpha: float
    delta: float
    method: str
    certify_queries: int
    """Queries in the certify split today."""
    labelled_queries: int
    """Labelled queries in all today (the certify split is this share of them)."""
    bound: float | None
    """The method's upper bound at the best threshold today (None: the curve is empty)."""
    accepted: int
    """Certify queries accepted at the best threshold today."""
    errors: int
    """Wrong ones among them."""
    certify_needed: int | None
    """Certify queries the best threshold would need (None: no point's rate is below α)."""
    labelled_needed: int | None
    """Labelled queries in all that would put ``certify_needed`` in the certify split."""

    @property
    def more(self) -> int | None:
        """Labelled queries to add (0 when the count today would do: see :attr:`reachable`)."""
        if self.labelled_needed is None:
            return None
        return max(0, self.labelled_needed - self.labelled_queries)

    @property
    def reachable(self) -> bool:
        """True when some point's rate is below α (a larger sample can certify it)."""
        return self.labelled_needed is not None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "more": self.more}


def certify_curve(confidence: ArrayLike, correct: ArrayLike) -> dict[str, list[int]]:
    """The certify split's acceptance curve as the artifact records it: accepted and wrong
    queries at each distinct confidence, highest first (confidences are not kept)."""
    curve = AcceptanceCurve.of(confidence, correct)
    return {
        "accepted": [int(a) for a in curve.accepted],
        "errors": [int(e) for e in curve.errors],
    }


def _passes(
    errors: NDArray[np.int64], accepted: NDArray[np.int64], alpha: float, delta: float, method: str
) -> NDArray[np.bool_]:
    """Whether the method's test certifies α after ``errors`` among ``accepted`` (vectorised)."""
    if method == "ltt-hb":
        rate = errors / accepted
        low = np.minimum(rate, alpha)
        with np.errstate(divide="ignore", invalid="ignore"):
            kl = np.where(low > 0, low * np.log(low / alpha), 0.0) + (1 - low) * np.log(
                (1 - low) / (1 - alpha)
            )
        hoeffding = np.exp(-accepted * kl)
        bentkus = math.e * stats.binom.cdf(errors, accepted, alpha)
        passed: NDArray[np.bool_] = np.minimum(1.0, np.minimum(hoeffding, bentkus)) <= delta
        return passed
    level = delta / GRID_POINTS if method == "sgr" else delta
    upper = np.where(
        errors >= accepted,
        1.0,
        stats.beta.ppf(1.0 - level, errors + 1, np.maximum(accepted - errors, 1)),
    )
    result: NDArray[np.bool_] = upper <= alpha
    return result


def _bound(errors: int, accepted: int, delta: float, method: str) -> float:
    """The method's upper bound on the rate after ``errors`` among ``accepted``."""
    if accepted == 0:
        return 1.0
    if method == "ltt-hb":
        return _hb_upper(errors, accepted, delta)
    return clopper_pearson_upper(
        errors, accepted, delta / GRID_POINTS if method == "sgr" else delta
    )


def _accepted_needed(
    taken: int, wrong: int, alpha: float, delta: float, method: str, *, first: int, last: int
) -> int | None:
    """The fewest accepted A ≥ ``first`` from which on the test passes after ⌈A · wrong /
    taken⌉ errors (today's rate, never rounded in its favour); None when that is above
    ``last``.

    Each time the rounded-up errors grow by one the bound jumps up, so a first pass can be
    followed by failures: the scan goes on until a whole period of that growth (⌈taken /
    wrong⌉ + 1 counts) has passed after the last failure. Past it the worst count of each
    period carries a rate closer to today's on more items, so its bound only falls.
    """
    period = 1 if wrong == 0 else -(-taken // wrong) + 1
    failed = first - 1  # the last count that failed
    start = first
    while start <= last + period:
        stop = start + _CHUNK - 1
        accepted = np.arange(start, stop + 1, dtype=np.int64)
        errors = -(-wrong * accepted // taken)  # ⌈e·A / a⌉, in integers
        misses = np.flatnonzero(~_passes(errors, accepted, alpha, delta, method))
        if misses.size:
            failed = int(accepted[misses[-1]])
        if stop - failed >= period:
            return failed + 1 if failed + 1 <= last else None
        start = stop + 1
    return None


def queries_to_certify(
    accepted: Sequence[int] | ArrayLike,
    errors: Sequence[int] | ArrayLike,
    *,
    certify_queries: int,
    labelled_queries: int,
    alpha: float,
    delta: float,
    method: str,
    limit: int = DEFAULT_LIMIT,
) -> CertifyEstimate:
    """Estimate the labelled queries in all that would certify ``alpha`` (module docstring).

    ``accepted`` / ``errors``: the certify split's acceptance curve (:func:`certify_curve`),
    highest confidence first; ``certify_queries``: the certify split's size;
    ``labelled_queries``: the labelled queries it was drawn from (fit, certify, held-out,
    and any a tune used).

    Raises:
        InvalidArgumentError: α or δ outside (0, 1), an unknown method, a curve that is not
            counts of the certify split, or fewer labelled than certify queries.
    """
    from ._risk_control import RISK_METHODS

    alpha, delta = _rate(alpha, "alpha"), _rate(delta, "delta")
    if method not in RISK_METHODS:
        raise InvalidArgumentError(
            f"unknown risk-control method {method!r}; choose one of {', '.join(RISK_METHODS)}",
            field="method",
        )
    taken = np.asarray(accepted, dtype=np.int64)
    wrong = np.asarray(errors, dtype=np.int64)
    if (
        taken.ndim != 1
        or wrong.shape != taken.shape
        or (taken.size and (taken[0] < 1 or taken[-1] > certify_queries))
        or np.any(np.diff(taken) <= 0)
        or np.any(wrong < 0)
        or np.any(wrong > taken)
        or np.any(np.diff(wrong) < 0)
    ):
        raise InvalidArgumentError(
            "the certify curve must hold increasing accepted counts (at most the certify "
            "queries) with as many or fewer errors each",
            field="curve",
        )
    if not 0 < certify_queries <= labelled_queries:
        raise InvalidArgumentError(
            f"need 0 < certify queries ({certify_queries}) <= labelled queries "
            f"({labelled_queries})",
            field="curve",
        )
    empty = CertifyEstimate(
        alpha, delta, method, certify_queries, labelled_queries, None, 0, 0, None, None
    )
    if not taken.size:
        return empty
    level = delta / GRID_POINTS if method == "sgr" else delta
    floor = min_accepted_for(alpha, level)  # no bound reaches α on fewer, whatever the test
    best: tuple[int, int] | None = None  # (certify queries needed, point)
    for point in range(taken.size):
        a, e = int(taken[point]), int(wrong[point])
        if e >= alpha * a:
            continue
        # A point whose coverage cannot beat the best so far is skipped unscanned.
        cap = limit if best is None else min(limit, best[0] * a // certify_queries)
        need = _accepted_needed(a, e, alpha, delta, method, first=floor, last=cap)
        if need is None:
            continue
        certify = -(-need * certify_queries // a)
        if best is None or certify < best[0]:
            best = (certify, point)
    if best is None:
        bounds = [_bound(int(e), int(a), delta, method) for a, e in zip(taken, wrong, strict=True)]
        point = int(np.argmin(bounds))
        return CertifyEstimate(
            alpha,
            delta,
            method,
            certify_queries,
            labelled_queries,
            bounds[point],
            int(taken[point]),
            int(wrong[point]),
            None,
            None,
        )
    certify, point = best
    a, e = int(taken[point]), int(wrong[point])
    return CertifyEstimate(
        alpha,
        delta,
        method,
        certify_queries,
        labelled_queries,
        _bound(e, a, delta, method),
        a,
        e,
        certify,
        -(-certify * labelled_queries // certify_queries),
    )


def estimate_from_artifact(
    metrics: Mapping[str, Any],
    training_data: Mapping[str, Any],
    *,
    alpha: float,
    delta: float,
    method: str,
) -> CertifyEstimate | None:
    """:func:`queries_to_certify` on what an artifact recorded; None for an artifact
    calibrated before the certify curve was kept."""
    curve = metrics.get("certify_curve")
    split = training_data.get("split") or {}
    if not curve or not isinstance(split.get("risk"), int) or not split["risk"]:
        return None
    labelled = int(training_data.get("labelled_queries") or training_data.get("queries") or 0)
    return queries_to_certify(
        curve["accepted"],
        curve["errors"],
        certify_queries=int(split["risk"]),
        labelled_queries=max(labelled, int(split["risk"])),
        alpha=alpha,
        delta=delta,
        method=method,
    )


def not_certified_message(
    alpha: float, labelled_queries: int, estimate: CertifyEstimate | None
) -> str:
    """One sentence: α is not certified on these labelled queries, and what would certify it."""
    said = f"alpha={alpha:g} is not certified" + (
        f" on {labelled_queries} labelled queries" if labelled_queries else ""
    )
    if estimate is None:
        return (
            f"{said}; this calibrator predates the record of its certify queries: recalibrate "
            "(`tribunal calibrate`) to see how many labelled queries would certify it"
        )
    if estimate.bound is None:
        return f"{said}: its certify split accepted nothing"
    at = (
        f" (bound {estimate.bound:.3f} at the best threshold: {estimate.errors} wrong of "
        f"{estimate.accepted} certify queries accepted"
        + (
            ", a narrow pass that the risk control's planned test sequence did not reach"
            if estimate.bound <= alpha
            else ""
        )
        + ")"
    )
    if estimate.labelled_needed is None:
        return (
            f"{said}{at}; no threshold's error rate on the certify queries is below "
            f"{alpha:g}, so more labelled queries alone would not certify it: lower the error "
            "rate first (`tribunal tune` teaches the KB from labelled queries)"
        )
    if not estimate.more:
        return (
            f"{said}{at}; at that error rate {estimate.labelled_needed} labelled queries would "
            "do, but the risk control's planned test sequence stopped before that threshold: "
            "more labelled queries make that less likely — label more with the review page "
            "(`tribunal review serve`) and run `tribunal calibrate`"
        )
    return (
        f"{said}{at}; about {estimate.labelled_needed} labelled queries in all "
        f"({estimate.more} more) would certify it at today's error rate and coverage — label "
        "more with the review page (`tribunal review serve`) and run `tribunal calibrate`"
    )


def artifact_not_certified(artifact: Any, alpha: float) -> str:
    """:func:`not_certified_message` for a :class:`~tribunal.confidence.CalibratorArtifact`
    that certifies no threshold at ``alpha``, with its risk control's δ and method."""
    from ._risk_control import RISK_METHODS

    config = artifact.config
    delta, method = config.get("delta"), config.get("method")
    for threshold in artifact.thresholds:
        if math.isclose(threshold.alpha, alpha, rel_tol=1e-9, abs_tol=1e-12):
            delta, method = threshold.delta, threshold.method
    data = artifact.training_data
    labelled = int(data.get("labelled_queries") or data.get("queries") or 0)
    estimate = None
    if isinstance(delta, int | float) and method in RISK_METHODS:
        estimate = estimate_from_artifact(
            artifact.metrics, data, alpha=alpha, delta=delta, method=method
        )
    return not_certified_message(alpha, labelled, estimate)
