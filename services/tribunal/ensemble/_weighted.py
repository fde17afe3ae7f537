"""Weighted vote: logistic regression on the judges' votes (global weights, no query)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import NDArray

from ._base import Aggregator, EnsembleInputs, FloatArray, InputKind, Validation

__all__ = ["WeightedVote"]


def _log_loss(labels: NDArray[np.int64], p: FloatArray) -> float:
    p = np.clip(p, 1e-7, 1 - 1e-7)
    return float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p)))


class WeightedVote(Aggregator):
    """P(match) = sigmoid(w · s + b), one weight per judge, fitted on training rows.

    The L2 strength is chosen on the validation rows (log loss) from ``c_grid``;
    without validation rows the middle of the grid is used.
    """

    name: ClassVar[str] = "weighted"

    def __init__(
        self,
        *,
        inputs: InputKind = "votes",
        c_grid: Sequence[float] = (0.01, 0.1, 1.0, 10.0, 100.0),
    ) -> None:
        self.inputs: InputKind = inputs
        """Per-judge input: ``votes`` (RAL2M) or ``probabilities`` (P(yes))."""
        self.c_grid: tuple[float, ...] = tuple(float(c) for c in c_grid)
        """Inverse L2 strengths tried."""
        self.coef_: NDArray[np.float64] = np.zeros(0)
        """Weight per judge."""
        self.intercept_: float = 0.0

    def fit(
        self,
        inputs: EnsembleInputs,
        labels: NDArray[np.int64],
        validation: Validation | None = None,
    ) -> Self:
        from sklearn.linear_model import LogisticRegression

        x = inputs.judge_inputs(self.inputs)
        grid = self.c_grid if validation is not None else (self.c_grid[len(self.c_grid) // 2],)
        best: tuple[float, float, Any] | None = None
        for c in grid:
            model = LogisticRegression(C=c, max_iter=1000).fit(x, labels)
            if validation is None:
                best = (0.0, c, model)
                break
            val_inputs, val_labels = validation
            loss = _log_loss(
                val_labels, model.predict_proba(val_inputs.judge_inputs(self.inputs))[:, 1]
            )
            if best is None or loss < best[0]:
                best = (loss, c, model)
        assert best is not None
        loss, c, model = best
        self.coef_ = model.coef_[0].astype(np.float64)
        self.intercept_ = float(model.intercept_[0])
        self.n_judges_ = inputs.n_judges
        self.threshold_ = 0.5
        self.fit_info_ = {"C": c, "validation_log_loss": loss if validation is not None else None}
        return self

    def predict_proba(self, inputs: EnsembleInputs) -> FloatArray:
        self._check(inputs)
        z = inputs.judge_inputs(self.inputs).astype(np.float64) @ self.coef_ + self.intercept_
        return 1.0 / (1.0 + np.exp(-z))

    def get_config(self) -> dict[str, Any]:
        return {"inputs": self.inputs, "c_grid": list(self.c_grid)}

    def get_state(self) -> dict[str, NDArray[Any]]:
        return {"coef": self.coef_, "intercept": np.array([self.intercept_])}

    def _set_state(self, state: Mapping[str, NDArray[Any]], info: Mapping[str, Any]) -> None:
        self.coef_ = np.asarray(state["coef"], dtype=np.float64)
        self.intercept_ = float(np.asarray(state["intercept"])[0])
