"""The risk-control methods by name: each picks an acceptance threshold for (α, δ).

Every method promises the same thing under the same assumption — with
probability ≥ 1 − δ over the calibration draw, the hallucination rate
P(wrong | confidence ≥ λ̂) on future traffic exchangeable with the calibration
items is ≤ α — and differs in how much coverage it keeps on a few hundred items:

- ``clopper-pearson``: fixed-sequence scan from a planned start down every
  distinct certify confidence (:mod:`._clopper_pearson`);
- ``ltt``: Learn-then-Test, binomial p-values on a planned grid, fixed
  sequence from a planned start (:mod:`._learn_then_test`);
- ``ltt-hb``: the same with Hoeffding–Bentkus p-values;
- ``sgr``: Geifman & El-Yaniv's binary search, on a planned grid with a union
  bound over every grid point (:mod:`._sgr`).

Each reads a *plan* — labelled items the test never sees — to fix what it tests
before the certify items are read (:mod:`._risk_plan`); that is what makes each
guarantee exact rather than shown by simulation.
"""

from __future__ import annotations

from collections.abc import Callable

from numpy.typing import ArrayLike

from ..core import InvalidArgumentError
from ..core.settings import DEFAULT_RISK_METHOD, RISK_METHOD_NAMES, RiskMethod
from ._clopper_pearson import select_risk_threshold
from ._learn_then_test import learn_then_test_threshold
from ._sgr import sgr_threshold
from ._threshold import RiskThreshold

__all__ = ["DEFAULT_RISK_METHOD", "RISK_METHODS", "Plan", "RiskMethod", "select_threshold"]

Plan = tuple[ArrayLike, ArrayLike]
"""Confidences and 0/1 labels of items the test never sees (see :mod:`._risk_plan`)."""


def _ltt_hb(
    confidence: ArrayLike,
    correct: ArrayLike,
    *,
    alpha: float,
    delta: float,
    plan: Plan | None = None,
) -> RiskThreshold:
    return learn_then_test_threshold(
        confidence, correct, alpha=alpha, delta=delta, p_value="hoeffding-bentkus", plan=plan
    )


RISK_METHODS: dict[str, Callable[..., RiskThreshold]] = {
    "clopper-pearson": select_risk_threshold,
    "ltt": learn_then_test_threshold,
    "ltt-hb": _ltt_hb,
    "sgr": sgr_threshold,
}
assert tuple(RISK_METHODS) == RISK_METHOD_NAMES


def select_threshold(
    confidence: ArrayLike,
    correct: ArrayLike,
    *,
    alpha: float,
    delta: float,
    method: str = DEFAULT_RISK_METHOD,
    plan: Plan | None = None,
) -> RiskThreshold:
    """The threshold ``method`` certifies for (α, δ) on certify confidences and labels.

    ``plan``: confidences and labels of items independent of these (in ``tribunal
    calibrate``, the decisions on the calibrator's fit queries), read to fix the grid and
    start; without it each method sets a seeded 30% of the items aside as its plan.

    Raises:
        InvalidArgumentError: an unknown method, α or δ outside (0, 1), or bad arrays.
    """
    try:
        select = RISK_METHODS[method]
    except KeyError:
        raise InvalidArgumentError(
            f"unknown risk-control method {method!r}; choose one of {', '.join(RISK_METHODS)}",
            field="method",
        ) from None
    return select(confidence, correct, alpha=alpha, delta=delta, plan=plan)
