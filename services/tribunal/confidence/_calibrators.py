"""Calibrators: signals in, P(the candidate is a correct answer) out.

Three kinds here (the sign-constrained :class:`~._monotone.MonotoneCalibrator` is in
its own module; ``_kinds`` names them all), each fitted with scikit-learn/scipy and
then predicting from its stored parameters only, so a calibrator restored from its
artifact predicts bit-for-bit what the fitted one did:

- :class:`PlattCalibrator`: logistic regression on the whole signal vector
  (mean-imputed values + missing indicators, standardised).
- :class:`IsotonicCalibrator`: a monotone step function of one chosen score.
- :class:`TemperatureCalibrator`: ``sigmoid(logit(score) / T)`` on one chosen
  score that is a probability; one parameter, fitted by NLL.

Hyperparameters are typed attributes; fitted state ends in ``_``.

Inputs outside what a calibrator was fitted on are **clamped, never extrapolated**:
every signal is clamped into its column's training range (:class:`FeatureSpace`), so
a BM25 score of 1e300 counts as the largest BM25 seen in training. Platt artifacts
fitted before ranges were recorded clamp each standardised feature to ±√(n − 1), n
the fit rows: by Samuelson's inequality no training value lies further from the mean
(in population standard deviations), so this range contains every fitted value.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import optimize, special

from ..core import FailedPreconditionError, InvalidArgumentError
from ..core.settings import CalibratorKind
from ._features import FeatureSpace, signal_values
from ._signals import Signals

__all__ = [
    "Calibrator",
    "CalibratorKind",
    "IsotonicCalibrator",
    "PlattCalibrator",
    "TemperatureCalibrator",
]


def _training_labels(labels: ArrayLike, n: int) -> NDArray[np.int64]:
    array = np.asarray(labels)
    if array.shape != (n,):
        raise InvalidArgumentError(f"expected {n} labels, got shape {array.shape}", field="labels")
    if not np.isin(array, (0, 1)).all():
        raise InvalidArgumentError("labels must be 0 or 1", field="labels")
    if np.unique(array).size < 2:
        raise InvalidArgumentError(
            "calibration needs both correct (1) and wrong (0) examples", field="labels"
        )
    return array.astype(np.int64)


def signal_field(column: str) -> str:
    """The request field a feature column comes from (``judge_p_yes.a`` → ``judge_p_yes[a]``)."""
    for prefix in ("judge_p_yes", "extra"):
        if column.startswith(prefix + "."):
            return f"{prefix}[{column[len(prefix) + 1 :]}]"
    if column == "retrieval_reciprocal_rank":
        return "retrieval_rank"
    return column.split(".", maxsplit=1)[0]


def _item_field(where: str, index: int, n: int, column: str) -> str:
    # A lone item is "signals.x"; in a list it is "items[3].signals.x" (or "data[3]...").
    place = f"{where}[{index}].signals" if n > 1 else "signals"
    return f"{place}.{signal_field(column)}"


class Calibrator(ABC):
    """Base of every calibrator: ``fit`` on signals and labels, then ``predict``."""

    kind: ClassVar[CalibratorKind]
    space_: FeatureSpace
    """The columns seen in training (also decides which judge/extra names are known)."""

    @abstractmethod
    def fit(self, signals: Sequence[Signals], labels: ArrayLike) -> Self:
        """Fit on ``signals`` with ``labels`` (1 = correct answer); returns self."""

    @abstractmethod
    def _predict(self, signals: Sequence[Signals]) -> NDArray[np.float64]: ...

    @abstractmethod
    def hyperparameters(self) -> dict[str, Any]:
        """The constructor arguments, JSON-ready."""

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The fitted parameters, JSON-ready (the space is stored separately)."""

    @classmethod
    @abstractmethod
    def restore(
        cls, hyperparameters: Mapping[str, Any], state: Mapping[str, Any], space: FeatureSpace
    ) -> Self:
        """Rebuild a fitted calibrator from :meth:`hyperparameters` and :meth:`state`."""

    @property
    def score_signal(self) -> str | None:
        """The one column a single-score calibrator reads; None for the full vector."""
        return None

    @property
    def fitted(self) -> bool:
        return hasattr(self, "space_")

    def check(self, signals: Signals) -> None:
        """Refuse one item this calibrator cannot score; ``field`` names the signal.

        Raises:
            InvalidArgumentError: an unknown judge/extra name (or, for a single-score
                calibrator, its score missing or out of range).
        """
        self.space_.check_known(signals)

    def predict(self, signals: Sequence[Signals]) -> NDArray[np.float64]:
        """Calibrated P(correct) per item, in [0, 1].

        Raises:
            FailedPreconditionError: not fitted.
            InvalidArgumentError: a judge/extra name the calibrator never saw, or a
                single-score calibrator's score is missing.
        """
        if not self.fitted:
            raise FailedPreconditionError(f"the {self.kind} calibrator is not fitted")
        if not signals:
            return np.zeros(0)
        return np.clip(self._predict(signals), 0.0, 1.0)


@dataclass
class PlattCalibrator(Calibrator):
    """Logistic regression (Platt scaling) on the full signal vector."""

    kind: ClassVar[CalibratorKind] = "platt"
    C: float = 1.0
    """Inverse L2 regularisation strength (scikit-learn ``C``)."""
    max_iter: int = 1000
    """L-BFGS iteration cap."""
    space_: FeatureSpace = field(init=False, repr=False)
    mean_: tuple[float, ...] = field(init=False, repr=False)
    """Standardisation means of the feature columns."""
    scale_: tuple[float, ...] = field(init=False, repr=False)
    """Standardisation scales (1 for a constant column)."""
    coef_: tuple[float, ...] = field(init=False, repr=False)
    """Logistic weights on the standardised features."""
    intercept_: float = field(init=False, repr=False)
    fit_rows_: int | None = field(init=False, repr=False, default=None)
    """Rows the regression was fitted on (recorded in the state of newer artifacts; for
    older ones :meth:`CalibratorArtifact.load` supplies it from the split sizes)."""
    fit_rows_hint_: int | None = field(init=False, repr=False, default=None)

    def fit(self, signals: Sequence[Signals], labels: ArrayLike) -> Self:
        y = _training_labels(labels, len(signals))
        self.fit_rows_ = len(signals)
        space = FeatureSpace.fit(signals)
        features = space.transform(signals)
        # scikit-learn only where a calibrator is fitted: serving one never needs it, and
        # its import costs every process seconds of CPU.
        from sklearn.linear_model import LogisticRegression
        from sklearn.preprocessing import StandardScaler

        scaler = StandardScaler().fit(features)
        model = LogisticRegression(C=self.C, max_iter=self.max_iter)
        model.fit(scaler.transform(features), y)
        self.space_ = space
        self.mean_ = tuple(float(v) for v in scaler.mean_)
        self.scale_ = tuple(float(v) for v in scaler.scale_)
        self.coef_ = tuple(float(v) for v in model.coef_[0])
        self.intercept_ = float(model.intercept_[0])
        return self

    def _predict(self, signals: Sequence[Signals]) -> NDArray[np.float64]:
        features = self.space_.transform(signals)
        standard = (features - np.asarray(self.mean_)) / np.asarray(self.scale_)
        rows = self.fit_rows_ or self.fit_rows_hint_
        if rows is not None and rows > 1:
            limit = math.sqrt(rows - 1)  # Samuelson: no fitted value is further out
            standard = np.clip(standard, -limit, limit)
        result: NDArray[np.float64] = special.expit(
            standard @ np.asarray(self.coef_) + self.intercept_
        )
        return result

    def hyperparameters(self) -> dict[str, Any]:
        return {"C": self.C, "max_iter": self.max_iter}

    def state(self) -> dict[str, Any]:
        state: dict[str, Any] = {
            "feature_names": list(self.space_.feature_names),
            "mean": list(self.mean_),
            "scale": list(self.scale_),
            "coef": list(self.coef_),
            "intercept": self.intercept_,
        }
        if self.fit_rows_ is not None:
            state["fit_rows"] = self.fit_rows_
        return state

    @classmethod
    def restore(
        cls, hyperparameters: Mapping[str, Any], state: Mapping[str, Any], space: FeatureSpace
    ) -> Self:
        calibrator = cls(**hyperparameters)
        if list(state["feature_names"]) != list(space.feature_names):
            raise FailedPreconditionError("platt parameters do not match the artifact's features")
        calibrator.space_ = space
        calibrator.mean_ = tuple(float(v) for v in state["mean"])
        calibrator.scale_ = tuple(float(v) for v in state["scale"])
        calibrator.coef_ = tuple(float(v) for v in state["coef"])
        calibrator.intercept_ = float(state["intercept"])
        if "fit_rows" in state:
            calibrator.fit_rows_ = int(state["fit_rows"])
        return calibrator


class _OneScore(Calibrator):
    """A calibrator of one score column that must be present on every item."""

    score: str

    @property
    def score_signal(self) -> str:
        return self.score

    def check(self, signals: Signals) -> None:
        super().check(signals)
        if self.score not in signal_values(signals):
            raise InvalidArgumentError(
                f"the {self.kind} calibrator reads signal {self.score!r}, which is missing",
                field=f"signals.{signal_field(self.score)}",
            )

    def _scores(
        self, space: FeatureSpace, signals: Sequence[Signals], where: str
    ) -> NDArray[np.float64]:
        values = space.raw(signals)[:, space.column(self.score)]
        missing = np.flatnonzero(np.isnan(values))
        if missing.size:
            raise InvalidArgumentError(
                f"the {self.kind} calibrator reads signal {self.score!r}, which is missing "
                f"on {missing.size} item(s)",
                field=_item_field(where, int(missing[0]), len(signals), self.score),
            )
        return values


@dataclass
class IsotonicCalibrator(_OneScore):
    """Isotonic (monotone non-decreasing) regression of the label on one score."""

    kind: ClassVar[CalibratorKind] = "isotonic"
    score: str = "ensemble_p_match"
    """Feature column read (see :class:`FeatureSpace`); higher must mean more likely correct."""
    space_: FeatureSpace = field(init=False, repr=False)
    x_thresholds_: tuple[float, ...] = field(init=False, repr=False)
    """Breakpoints of the fitted step function (ascending score values)."""
    y_thresholds_: tuple[float, ...] = field(init=False, repr=False)
    """Calibrated probability at each breakpoint; linear in between, clipped outside."""

    def fit(self, signals: Sequence[Signals], labels: ArrayLike) -> Self:
        y = _training_labels(labels, len(signals))
        space = FeatureSpace.fit(signals)
        scores = self._scores(space, signals, "data")
        from sklearn.isotonic import IsotonicRegression  # fitting only (see above)

        model = IsotonicRegression(y_min=0.0, y_max=1.0, increasing=True, out_of_bounds="clip")
        model.fit(scores, y)
        self.space_ = space
        self.x_thresholds_ = tuple(float(v) for v in model.X_thresholds_)
        self.y_thresholds_ = tuple(float(v) for v in model.y_thresholds_)
        return self

    def _predict(self, signals: Sequence[Signals]) -> NDArray[np.float64]:
        scores = self._scores(self.space_, signals, "items")
        # np.interp holds the end values outside the range: scikit-learn's "clip".
        return np.interp(scores, self.x_thresholds_, self.y_thresholds_)

    def hyperparameters(self) -> dict[str, Any]:
        return {"score": self.score}

    def state(self) -> dict[str, Any]:
        return {"x_thresholds": list(self.x_thresholds_), "y_thresholds": list(self.y_thresholds_)}

    @classmethod
    def restore(
        cls, hyperparameters: Mapping[str, Any], state: Mapping[str, Any], space: FeatureSpace
    ) -> Self:
        calibrator = cls(**hyperparameters)
        calibrator.space_ = space
        calibrator.x_thresholds_ = tuple(float(v) for v in state["x_thresholds"])
        calibrator.y_thresholds_ = tuple(float(v) for v in state["y_thresholds"])
        return calibrator


@dataclass
class TemperatureCalibrator(_OneScore):
    """Temperature scaling: ``sigmoid(logit(score) / T)``, T fitted by negative log-likelihood.

    It only sharpens (T < 1) or softens (T > 1) a score that is already a
    probability; it cannot move the 0.5 point, so it suits scores such as a
    judge's P(yes), not similarities.
    """

    kind: ClassVar[CalibratorKind] = "temperature"
    score: str = "ensemble_p_match"
    """Feature column read; must be a probability in [0, 1]."""
    epsilon: float = 1e-6
    """Scores are clipped to [ε, 1 − ε] so the logit of 0 or 1 stays finite."""
    space_: FeatureSpace = field(init=False, repr=False)
    temperature_: float = field(init=False, repr=False)
    """The fitted T (searched in [0.01, 100])."""

    def check(self, signals: Signals) -> None:
        super().check(signals)
        value = signal_values(signals)[self.score]
        if not 0.0 <= value <= 1.0:
            raise InvalidArgumentError(
                f"temperature scaling reads the logit of a probability, but {self.score!r} "
                f"is {value}",
                field=f"signals.{signal_field(self.score)}",
            )

    def _logits(
        self, space: FeatureSpace, signals: Sequence[Signals], where: str
    ) -> NDArray[np.float64]:
        scores = self._scores(space, signals, where)
        outside = np.flatnonzero((scores < 0) | (scores > 1))
        if outside.size:
            raise InvalidArgumentError(
                f"temperature scaling reads the logit of a probability, but {self.score!r} "
                f"is {scores[outside[0]]} on item {outside[0]}; choose a score in [0, 1]",
                field=_item_field(where, int(outside[0]), len(signals), self.score),
            )
        logits: NDArray[np.float64] = special.logit(np.clip(scores, self.epsilon, 1 - self.epsilon))
        return logits

    def fit(self, signals: Sequence[Signals], labels: ArrayLike) -> Self:
        y = _training_labels(labels, len(signals)).astype(np.float64)
        space = FeatureSpace.fit(signals)
        logits = self._logits(space, signals, "data")

        def nll(log_t: float) -> float:
            z = logits / math.exp(log_t)
            # -log σ(z) = log(1 + e^-z); written with logaddexp to stay finite.
            return float(np.mean(np.logaddexp(0.0, z) - y * z))

        found = optimize.minimize_scalar(
            nll, bounds=(math.log(0.01), math.log(100.0)), method="bounded", options={"xatol": 1e-9}
        )
        self.space_ = space
        self.temperature_ = float(math.exp(found.x))
        return self

    def _predict(self, signals: Sequence[Signals]) -> NDArray[np.float64]:
        result: NDArray[np.float64] = special.expit(
            self._logits(self.space_, signals, "items") / self.temperature_
        )
        return result

    def hyperparameters(self) -> dict[str, Any]:
        return {"score": self.score, "epsilon": self.epsilon}

    def state(self) -> dict[str, Any]:
        return {"temperature": self.temperature_}

    @classmethod
    def restore(
        cls, hyperparameters: Mapping[str, Any], state: Mapping[str, Any], space: FeatureSpace
    ) -> Self:
        calibrator = cls(**hyperparameters)
        calibrator.space_ = space
        calibrator.temperature_ = float(state["temperature"])
        return calibrator
