"""Majority vote: P(match) is the share of judges voting yes; a strict majority matches."""

from __future__ import annotations

from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from ._base import Aggregator, EnsembleInputs, FloatArray, Validation

__all__ = ["MajorityVote"]


class MajorityVote(Aggregator):
    """Unweighted vote; ties (an even number of judges split evenly) say "no match".

    Nothing is learned: ``fit`` only records the number of judges and sets the decision
    threshold to a strict majority, (K // 2 + 1) / K.
    """

    name: ClassVar[str] = "majority"

    def fit(
        self,
        inputs: EnsembleInputs,
        labels: NDArray[np.int64],
        validation: Validation | None = None,
    ) -> Self:
        self.set_judges(inputs.n_judges)
        return self

    def set_judges(self, n_judges: int) -> Self:
        """Ready for ``n_judges`` judges without data (majority needs none)."""
        self.n_judges_ = n_judges
        self.threshold_ = (n_judges // 2 + 1) / n_judges
        self.fit_info_ = {}
        return self

    def predict_proba(self, inputs: EnsembleInputs) -> FloatArray:
        self._check(inputs)
        return np.asarray(inputs.votes.mean(axis=1), dtype=np.float64)

    def predict(self, inputs: EnsembleInputs) -> NDArray[np.int64]:
        # Integer comparison: a float threshold of e.g. 2/3 must not lose a vote to rounding.
        self._check(inputs)
        return np.asarray(2 * inputs.votes.sum(axis=1) > inputs.n_judges, dtype=np.int64)

    def get_config(self) -> dict[str, Any]:
        return {}
