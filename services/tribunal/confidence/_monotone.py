"""A logistic calibrator on signals that mean the same on every KB, monotone in each.

:class:`MonotoneCalibrator` reads a few chosen signals — by default the
matcher's P(match), its margin over the query's other candidates, the reciprocal
retrieval rank, the reciprocal-rank-fusion score (how high *both* retrievers
ranked the entry: a function of ranks and the fusion constant only), the
dense cosine and the neighbour vote (the answer's share of the query's nearest
KB units) — and not collection-dependent magnitudes such as a raw BM25 score,
whose scale depends on the KB's vocabulary and lengths. A probability enters as
its logit. Each
weight is constrained to be ≥ 0, because for each of these signals the sign is
known: a higher P(match), a better rank or a closer embedding never makes a
candidate *less* likely to be right. A missing signal is imputed with its
training mean and flagged by an indicator (whose weight is free).

Inputs outside the range seen in fitting are clamped to that range before the
transform, so the calibrator never extrapolates beyond its data (a BM25-like
1e300 or a cosine above its training maximum scores like the maximum).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from ..core import FailedPreconditionError, InvalidArgumentError
from ._calibrators import Calibrator, CalibratorKind, _training_labels
from ._features import FeatureSpace
from ._signals import PROBABILITY_FIELDS, Signals

__all__ = ["PORTABLE_SIGNALS", "MonotoneCalibrator"]

PORTABLE_SIGNALS: tuple[str, ...] = (
    "ensemble_p_match",
    "ensemble_p_match_margin",
    "retrieval_reciprocal_rank",
    "retrieval_score",
    "dense_score",
    "neighbour_vote",
)
"""The default columns: a probability, its margin over the other candidates, the final
rank, the reciprocal-rank-fusion score (a function of the dense and sparse retrievers'
ranks only), a cosine and the answer's share of the query's nearest KB units — each on
the same scale on any KB."""


def _is_probability(column: str) -> bool:
    return column in PROBABILITY_FIELDS or column.startswith("judge_p_yes.")


@dataclass
class MonotoneCalibrator(Calibrator):
    """Logistic regression with non-negative weights on chosen signal columns."""

    kind: ClassVar[CalibratorKind] = "monotone"
    signals: tuple[str, ...] = PORTABLE_SIGNALS
    """Feature columns read (see :class:`FeatureSpace`); higher must never mean less likely
    correct. Columns absent from the training data are left out."""
    C: float = 1.0
    """Inverse L2 strength, as scikit-learn's ``C`` (on the standardised columns)."""
    epsilon: float = 1e-4
    """Probabilities are clipped to [ε, 1 − ε] before the logit."""
    space_: FeatureSpace = field(init=False, repr=False)
    columns_: tuple[str, ...] = field(init=False, repr=False)
    """The chosen columns present in training, in ``signals`` order."""
    low_: tuple[float, ...] = field(init=False, repr=False)
    """Smallest training value per column (inputs are clamped to [low, high])."""
    high_: tuple[float, ...] = field(init=False, repr=False)
    fill_: tuple[float, ...] = field(init=False, repr=False)
    """Imputed (transformed) value per column: its training mean."""
    mean_: tuple[float, ...] = field(init=False, repr=False)
    scale_: tuple[float, ...] = field(init=False, repr=False)
    coef_: tuple[float, ...] = field(init=False, repr=False)
    """Weights on the standardised columns (each ≥ 0)."""
    missing_coef_: tuple[float, ...] = field(init=False, repr=False)
    """Weights on the missing indicators (free sign)."""
    intercept_: float = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.signals = tuple(self.signals)
        if not self.signals:
            raise InvalidArgumentError("the monotone calibrator needs signals", field="signals")
        if not self.C > 0:
            raise InvalidArgumentError(f"C must be > 0, got {self.C}", field="C")

    # -- features ---------------------------------------------------------------------
    def _transformed(
        self, raw: NDArray[np.float64], low: NDArray[np.float64], high: NDArray[np.float64]
    ) -> NDArray[np.float64]:
        """Clamp each column to [low, high], logit the probabilities; NaN stays NaN."""
        out = np.clip(raw, low, high)
        for j, column in enumerate(self.columns_):
            if _is_probability(column):
                out[:, j] = special.logit(np.clip(out[:, j], self.epsilon, 1.0 - self.epsilon))
        return out

    def _design(self, values: NDArray[np.float64]) -> NDArray[np.float64]:
        """Standardised, imputed values followed by the 0/1 missing indicators."""
        missing = np.isnan(values)
        filled = np.where(missing, np.asarray(self.fill_), values)
        standard = (filled - np.asarray(self.mean_)) / np.asarray(self.scale_)
        return np.hstack([standard, missing.astype(np.float64)])

    def _raw(self, space: FeatureSpace, signals: Sequence[Signals]) -> NDArray[np.float64]:
        matrix = space.raw(signals)
        return matrix[:, [space.column(c) for c in self.columns_]]

    # -- fitting ----------------------------------------------------------------------
    def fit(self, signals: Sequence[Signals], labels: ArrayLike) -> Self:
        y = _training_labels(labels, len(signals)).astype(np.float64)
        space = FeatureSpace.fit(signals)
        self.columns_ = tuple(c for c in self.signals if c in space.columns)
        if not self.columns_:
            raise InvalidArgumentError(
                f"none of the monotone calibrator's signals ({', '.join(self.signals)}) "
                f"is in the data (it has {', '.join(space.columns)})",
                field="signals",
            )
        raw = self._raw(space, signals)
        self.low_ = tuple(float(v) for v in np.nanmin(raw, axis=0))
        self.high_ = tuple(float(v) for v in np.nanmax(raw, axis=0))
        values = self._transformed(raw, np.asarray(self.low_), np.asarray(self.high_))
        self.fill_ = tuple(float(v) for v in np.nanmean(values, axis=0))
        filled = np.where(np.isnan(values), np.asarray(self.fill_), values)
        scale = filled.std(axis=0)
        self.mean_ = tuple(float(v) for v in filled.mean(axis=0))
        self.scale_ = tuple(float(s) if s > 0 else 1.0 for s in scale)
        design = self._design(values)
        width = len(self.columns_)
        weights = self._solve(design, y, width)
        self.coef_ = tuple(float(w) for w in weights[:width])
        self.missing_coef_ = tuple(float(w) for w in weights[width:-1])
        self.intercept_ = float(weights[-1])
        self.space_ = space
        return self

    def _solve(self, design: NDArray[np.float64], y: NDArray[np.float64], width: int) -> Any:
        """Minimise Σ log-loss + ‖w‖² / (2C) with w ≥ 0 on the value columns (L-BFGS-B)."""
        n_features = design.shape[1]
        penalised = np.ones(n_features + 1)
        penalised[-1] = 0.0  # no penalty on the intercept

        def loss(params: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
            z = design @ params[:-1] + params[-1]
            # Σ log(1 + e^z) − y·z, written with logaddexp to stay finite.
            value = float(np.sum(np.logaddexp(0.0, z) - y * z))
            residual = special.expit(z) - y
            gradient = np.append(design.T @ residual, residual.sum())
            value += float(np.sum(penalised * params**2)) / (2.0 * self.C)
            gradient += penalised * params / self.C
            return value, gradient

        bounds = [(0.0, None)] * width + [(None, None)] * (n_features - width + 1)
        found = optimize.minimize(
            loss,
            np.zeros(n_features + 1),
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options={"maxiter": 1000, "gtol": 1e-10},
        )
        if not found.success and not np.isfinite(found.fun):  # pragma: no cover - defensive
            raise FailedPreconditionError(f"monotone calibrator fit failed: {found.message}")
        return found.x

    # -- predicting -------------------------------------------------------------------
    def _predict(self, signals: Sequence[Signals]) -> NDArray[np.float64]:
        raw = self._raw(self.space_, signals)
        values = self._transformed(raw, np.asarray(self.low_), np.asarray(self.high_))
        weights = np.asarray((*self.coef_, *self.missing_coef_))
        result: NDArray[np.float64] = special.expit(
            self._design(values) @ weights + self.intercept_
        )
        return result

    def hyperparameters(self) -> dict[str, Any]:
        return {"signals": list(self.signals), "C": self.C, "epsilon": self.epsilon}

    def state(self) -> dict[str, Any]:
        return {
            "columns": list(self.columns_),
            "low": list(self.low_),
            "high": list(self.high_),
            "fill": list(self.fill_),
            "mean": list(self.mean_),
            "scale": list(self.scale_),
            "coef": list(self.coef_),
            "missing_coef": list(self.missing_coef_),
            "intercept": self.intercept_,
        }

    @classmethod
    def restore(
        cls, hyperparameters: Mapping[str, Any], state: Mapping[str, Any], space: FeatureSpace
    ) -> Self:
        calibrator = cls(
            signals=tuple(hyperparameters["signals"]),
            C=float(hyperparameters["C"]),
            epsilon=float(hyperparameters["epsilon"]),
        )
        columns = tuple(state["columns"])
        if any(c not in space.columns for c in columns) or any(w < 0 for w in state["coef"]):
            raise FailedPreconditionError(
                "monotone calibrator parameters do not match the artifact's features"
            )
        calibrator.space_ = space
        calibrator.columns_ = columns
        for name in ("low", "high", "fill", "mean", "scale", "coef", "missing_coef"):
            setattr(calibrator, f"{name}_", tuple(float(v) for v in state[name]))
        calibrator.intercept_ = float(state["intercept"])
        return calibrator

    def weights(self) -> dict[str, float]:
        """Weight per standardised column (for reports)."""
        return dict(zip(self.columns_, self.coef_, strict=True))
