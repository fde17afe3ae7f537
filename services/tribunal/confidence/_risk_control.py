"""The risk-control methods by name: each picks an acceptance threshold for (α, δ).

Every method promises the same thing under the same assumption — with
probability ≥ 1 − δ over the calibration draw, the hallucination rate
P(wrong | confidence ≥ λ̂) on future traffic exchangeable with the calibration
items is ≤ α — and differs in how much coverage it keeps on a few hundred items:

- ``clopper-pearson``: fixed-sequence scan over every distinct confidence
  (:mod:`._clopper_pearson`);
- ``ltt``: Learn-then-Test, binomial p-values on a fixed 0.02 grid, fixed
  sequence (:mod:`._learn_then_test`);
- ``ltt-hb``: the same with Hoeffding–Bentkus p-values;
- ``sgr``: Geifman & El-Yaniv's selection with guaranteed risk, a binary
  search with a union bound (:mod:`._sgr`).
"""

from __future__ import annotations

from collections.abc import Callable

from numpy.typing import ArrayLike

from ..core import InvalidArgumentError
from ..core.settings import RISK_METHOD_NAMES, RiskMethod
from ._clopper_pearson import select_risk_threshold
from ._learn_then_test import learn_then_test_threshold
from ._sgr import sgr_threshold
from ._threshold import RiskThreshold

__all__ = ["RISK_METHODS", "RiskMethod", "select_threshold"]


def _ltt_hb(
    confidence: ArrayLike, correct: ArrayLike, *, alpha: float, delta: float
) -> RiskThreshold:
    return learn_then_test_threshold(
        confidence, correct, alpha=alpha, delta=delta, p_value="hoeffding-bentkus"
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
    method: str = "clopper-pearson",
) -> RiskThreshold:
    """The threshold ``method`` certifies for (α, δ) on calibration confidences and labels.

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
    return select(confidence, correct, alpha=alpha, delta=delta)
