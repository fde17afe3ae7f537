"""Certified auto-labels: which judge scores may be labelled automatically at error ≤ ε.

Given a labelled sample — items with a gold grade, the relevance judge's P(relevant)
for each and the query each belongs to — :func:`fit_plan` chooses two thresholds on
the judge's P: RELEVANT at or above the upper one, IRRELEVANT at or below the lower
one, humans in between, such that with probability ≥ 1 − δ over the sample the error
rate of the automatic labels (wrong automatic labels / automatic labels) is ≤ ε.

**Steps.**

1. *Split by query.* The sample's queries are divided at random (``seed``) into a
   calibration part (``calibration_share`` of the queries) and a certification part.
   No query has items on both sides, so the calibrator never saw a certified query.
2. *Calibrate* the judge's P on the calibration part: ``isotonic`` (the default:
   scikit-learn's isotonic regression, a monotone piecewise-linear map — it can learn
   that the judge's most confident "relevant" items are right less often than its most
   confident "irrelevant" ones) or ``platt`` (sigmoid(a · logit(p) + b), a > 0 required).
3. *Certify a band* on the certification part (:mod:`._plan_bands`). An item's automatic
   label is RELEVANT when its calibrated P ≥ 0.5, and it is labelled automatically when
   its certainty max(P, 1 − P) is ≥ λ. For a calibrated P the items of lowest certainty
   are the likeliest wrong, so for any share of humans this band has the fewest expected
   errors; on the judge's own scale it is asymmetric wherever the calibration is. The
   default test is Learn-then-Test (the confidence service's binomial p-values on its
   fixed 0.02 grid of λ, in fixed sequence from the widest band down) with a query-level
   test on every band as well (``clusters="query"``): see :mod:`._plan_bands` for those
   and the other methods and schemes.
4. *Map back.* The calibrator is monotone, so calibrated thresholds are judge
   thresholds: ``relevant_at`` is the lowest judge P whose calibrated P reaches the upper
   threshold, ``irrelevant_at`` the highest whose calibrated P is at most the lower one.
   A label job compares the judge's own P(relevant) with them.

**Guarantee and its assumption.** As for every method of the confidence service:
items labelled later must be exchangeable with the certification items (drawn from the
same distribution). Items of one query are alike, so a new set of queries differs more
from the sample than a new draw of items would: the item-level tests alone do not widen
for that, which is why the default also tests each band with queries as the units (a
cluster-robust bound, valid as the number of queries grows rather than exactly). Plan on
a sample of many queries, drawn like the queries to be labelled.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special, stats

from ..confidence import RISK_METHODS
from ..core import InvalidArgumentError
from ..core.settings import PLAN_CALIBRATOR_KINDS, PlanCalibratorKind
from ._plan_artifact import (
    BandChoice,
    Certification,
    CurvePoint,
    JudgeBinding,
    LabelPlan,
    PlanCalibrator,
    PlanData,
    PlanSplit,
)
from ._plan_bands import BandOutcome, band_outcome, select_grid, select_nested

__all__ = [
    "DEFAULT_CALIBRATION_SHARE",
    "DEFAULT_CALIBRATOR",
    "DEFAULT_METHOD",
    "CalibratorKind",
    "Clusters",
    "Scheme",
    "calibrate",
    "fit_plan",
]

Scheme = Literal["nested", "grid"]
CalibratorKind = PlanCalibratorKind
Clusters = Literal["query", "none"]
DEFAULT_METHOD = "ltt"
DEFAULT_CALIBRATOR: CalibratorKind = "isotonic"
DEFAULT_CALIBRATION_SHARE = 0.3
_P_CLIP = 1e-6
_CURVE = np.round(np.arange(0.50, 1.0, 0.01), 2)


@dataclass(frozen=True)
class _Sample:
    scores: NDArray[np.float64]
    gold: NDArray[np.int64]
    queries: NDArray[np.str_]


def _sample(scores: ArrayLike, gold: ArrayLike, queries: Sequence[str]) -> _Sample:
    p = np.asarray(scores, dtype=np.float64)
    y = np.asarray(gold)
    q = np.asarray([str(x) for x in queries])
    if p.ndim != 1 or y.shape != p.shape or q.shape != p.shape:
        raise InvalidArgumentError(
            f"scores, gold labels and queries must be 1-d and the same length "
            f"({p.shape}, {y.shape}, {q.shape})",
            field="input",
        )
    if p.size == 0:
        raise InvalidArgumentError("the sample holds no labelled item", field="input")
    if not (np.isfinite(p).all() and ((p >= 0) & (p <= 1)).all()):
        raise InvalidArgumentError("judge scores must be probabilities in [0, 1]", field="input")
    if not np.isin(y, (0, 1)).all():
        raise InvalidArgumentError("gold labels must be 0 or 1", field="input")
    return _Sample(p, y.astype(np.int64), q)


def _logit(p: NDArray[np.float64]) -> NDArray[np.float64]:
    clipped = np.clip(p, _P_CLIP, 1.0 - _P_CLIP)
    result: NDArray[np.float64] = special.logit(clipped)
    return result


def calibrate(calibrator: PlanCalibrator, scores: ArrayLike) -> NDArray[np.float64]:
    """Calibrated P(relevant) of judge scores."""
    p = np.asarray(scores, dtype=np.float64)
    if calibrator.kind == "isotonic":
        return np.interp(p, calibrator.x, calibrator.y)
    assert calibrator.coef is not None
    assert calibrator.intercept is not None
    result: NDArray[np.float64] = special.expit(calibrator.coef * _logit(p) + calibrator.intercept)
    return result


def _judge_threshold(calibrator: PlanCalibrator, calibrated: float, side: str) -> float | None:
    """The judge score where the calibrated P reaches ``calibrated``: the lowest score with
    calibrated P ≥ it (``side="high"``) or the highest with P ≤ it (``"low"``); None when
    no score does."""
    if calibrator.kind == "platt":
        assert calibrator.coef is not None
        assert calibrator.intercept is not None
        if calibrated <= 0.0 or calibrated >= 1.0:
            return None
        logit = (math.log(calibrated / (1.0 - calibrated)) - calibrator.intercept) / calibrator.coef
        return float(special.expit(logit))
    x, y = np.asarray(calibrator.x), np.asarray(calibrator.y)
    if side == "high":
        if y[-1] < calibrated:
            return None
        j = int(np.argmax(y >= calibrated))
        if j == 0:
            return 0.0
    else:
        if y[0] > calibrated:
            return None
        j = int(np.flatnonzero(y <= calibrated)[-1]) + 1
        if j == y.size:
            return 1.0
    # On the segment from point j - 1 to j, where the calibrated P crosses the value.
    x0, x1, y0, y1 = x[j - 1], x[j], y[j - 1], y[j]
    return float(x0 + (calibrated - y0) * (x1 - x0) / (y1 - y0)) if y1 > y0 else float(x0)


def _check_classes(sample: _Sample) -> None:
    if np.unique(sample.gold).size < 2:
        raise InvalidArgumentError(
            "the calibration queries hold only one class: label a sample with relevant and "
            "irrelevant items for several queries (or change --seed)",
            field="input",
        )


def _no_signal(sample: _Sample, queries: int) -> InvalidArgumentError:
    return InvalidArgumentError(
        f"the judge's P(relevant) does not rise with the gold labels on the {queries} "
        f"calibration queries ({sample.gold.size} items): plan on a sample of more queries "
        "(or a larger --calibration-share); if it persists, this judge cannot label this "
        "data automatically",
        field="input",
    )


def _fit_platt(sample: _Sample, queries: int) -> PlanCalibrator:
    from sklearn.linear_model import LogisticRegression

    _check_classes(sample)
    x = _logit(sample.scores).reshape(-1, 1)
    # Newton steps: exact and fast for one feature (lbfgs takes tens of iterations).
    model = LogisticRegression(C=1e4, solver="newton-cholesky", max_iter=100).fit(x, sample.gold)
    coef, intercept = float(model.coef_[0, 0]), float(model.intercept_[0])
    if coef <= 0:
        raise _no_signal(sample, queries)
    return PlanCalibrator(
        kind="platt", coef=coef, intercept=intercept, items=int(sample.gold.size), queries=queries
    )


def _fit_isotonic(sample: _Sample, queries: int) -> PlanCalibrator:
    from sklearn.isotonic import IsotonicRegression

    _check_classes(sample)
    model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(
        sample.scores, sample.gold
    )
    if np.unique(model.y_thresholds_).size < 2:
        raise _no_signal(sample, queries)
    return PlanCalibrator(
        kind="isotonic",
        x=[float(v) for v in model.X_thresholds_],
        y=[float(v) for v in model.y_thresholds_],
        items=int(sample.gold.size),
        queries=queries,
    )


def _split_queries(
    queries: NDArray[np.str_], share: float, seed: int
) -> tuple[list[str], list[str]]:
    unique = sorted(set(queries.tolist()))
    if len(unique) < 3:
        raise InvalidArgumentError(
            f"the sample has {len(unique)} quer{'y' if len(unique) == 1 else 'ies'}; a plan "
            "needs at least 3 (calibration and certification take different queries)",
            field="input",
        )
    if not 0.0 < share < 1.0:
        raise InvalidArgumentError(
            f"calibration share must be in (0, 1), got {share}", field="calibration_share"
        )
    order = np.random.default_rng(seed).permutation(len(unique))
    count = min(len(unique) - 1, max(1, round(share * len(unique))))
    calibration = sorted(unique[i] for i in order[:count])
    certification = sorted(unique[i] for i in order[count:])
    return calibration, certification


def _curve(
    calibrated: NDArray[np.float64], gold: NDArray[np.int64], delta: float
) -> list[CurvePoint]:
    outcomes = [band_outcome(calibrated, gold, float(h), float(1.0 - h)) for h in _CURVE]
    errors = np.array([o.errors for o in outcomes])
    auto = np.array([o.auto_labelled for o in outcomes])
    # clopper_pearson_upper for every point at once: the (1 - δ) quantile of
    # Beta(errors + 1, auto - errors), 1 when every automatic label is wrong.
    open_ = errors < auto
    bounds = np.ones(auto.size)
    bounds[open_] = stats.beta.ppf(1.0 - delta, errors[open_] + 1, auto[open_] - errors[open_])
    return [
        CurvePoint(
            calibrated_high=float(high),
            human_share=round(outcome.human_share, 6),
            error=None if outcome.error is None else round(outcome.error, 6),
            upper_bound=round(float(bound), 6) if outcome.auto_labelled else None,
        )
        for high, outcome, bound in zip(_CURVE, outcomes, bounds, strict=True)
    ]


def _band(calibrator: PlanCalibrator, low: float, high: float) -> BandChoice:
    relevant_at = _judge_threshold(calibrator, high, "high")
    irrelevant_at = _judge_threshold(calibrator, low, "low")
    return BandChoice(
        relevant_at=1.0 if relevant_at is None else relevant_at,
        irrelevant_at=(
            0.0
            if irrelevant_at is None
            else min(irrelevant_at, 1.0 if relevant_at is None else relevant_at)
        ),
        calibrated_high=high,
        calibrated_low=low,
        auto_relevant=relevant_at is not None,
        auto_irrelevant=irrelevant_at is not None,
    )


def _plain(
    calibrator: PlanCalibrator,
    calibrated: NDArray[np.float64],
    gold: NDArray[np.int64],
    epsilon: float,
) -> tuple[BandChoice | None, float | None]:
    """The narrowest nested band whose observed error is ≤ ε (no confidence bound)."""
    for high in sorted(_CURVE):
        outcome = band_outcome(calibrated, gold, float(high), float(1.0 - high))
        if outcome.error is not None and outcome.error <= epsilon:
            return _band(calibrator, float(1.0 - high), float(high)), outcome.human_share
    return None, None


def fit_plan(
    scores: ArrayLike,
    gold: ArrayLike,
    queries: Sequence[str],
    *,
    epsilon: float,
    delta: float,
    judge: JudgeBinding,
    data: Mapping[str, Any],
    method: str = DEFAULT_METHOD,
    scheme: Scheme = "nested",
    clusters: Clusters = "query",
    calibrator_kind: CalibratorKind = DEFAULT_CALIBRATOR,
    calibration_share: float = DEFAULT_CALIBRATION_SHARE,
    seed: int = 0,
    created: str | None = None,
) -> LabelPlan:
    """A sealed :class:`LabelPlan` for judge ``scores`` and 0/1 ``gold`` labels.

    ``data`` describes the sample (:class:`PlanData` fields but ``items``, ``queries``
    and ``relevant``, which are counted here).

    Raises:
        InvalidArgumentError: ε or δ outside (0, 1), an unknown method or scheme, fewer
            than three queries, a calibration part with one class, or a judge whose
            score does not rise with relevance.
    """
    for name, value in (("epsilon", epsilon), ("delta", delta)):
        if not (isinstance(value, int | float) and math.isfinite(value) and 0.0 < value < 1.0):
            raise InvalidArgumentError(f"{name} must be in (0, 1), got {value!r}", field=name)
    if method not in RISK_METHODS:
        raise InvalidArgumentError(
            f"unknown risk-control method {method!r}; choose one of {', '.join(RISK_METHODS)}",
            field="method",
        )
    if scheme not in ("nested", "grid"):
        raise InvalidArgumentError(f"scheme must be nested or grid, got {scheme!r}", field="scheme")
    if clusters not in ("query", "none"):
        raise InvalidArgumentError(
            f"clusters must be query or none, got {clusters!r}", field="clusters"
        )
    if calibrator_kind not in PLAN_CALIBRATOR_KINDS:
        raise InvalidArgumentError(
            f"calibrator must be {' or '.join(PLAN_CALIBRATOR_KINDS)}, got {calibrator_kind!r}",
            field="calibrator",
        )
    sample = _sample(scores, gold, queries)
    calibration_queries, certification_queries = _split_queries(
        sample.queries, calibration_share, seed
    )
    in_calibration = np.isin(sample.queries, calibration_queries)
    fit_part = _Sample(
        sample.scores[in_calibration], sample.gold[in_calibration], sample.queries[in_calibration]
    )
    fit = _fit_isotonic if calibrator_kind == "isotonic" else _fit_platt
    calibrator = fit(fit_part, len(calibration_queries))
    scores_c, gold_c = sample.scores[~in_calibration], sample.gold[~in_calibration]
    calibrated = calibrate(calibrator, scores_c)

    if scheme == "nested":
        selection = select_nested(
            calibrated, gold_c, sample.queries[~in_calibration],
            epsilon=epsilon, delta=delta, method=method, clusters=clusters,
        )  # fmt: skip
    else:
        selection = select_grid(calibrated, gold_c, epsilon=epsilon, delta=delta)
    band: BandChoice | None = None
    if selection.low is not None and selection.high is not None:
        band = _band(calibrator, selection.low, selection.high)
    if band is not None:
        outcome = band_outcome(calibrated, gold_c, band.calibrated_high, band.calibrated_low)
    else:
        outcome = BandOutcome(int(gold_c.size), 0, 0)
    plain, plain_share = _plain(calibrator, calibrated, gold_c, epsilon)
    plan = LabelPlan(
        created=created or dt.date.today().isoformat(),
        judge=judge,
        data=PlanData(
            **{**dict(data), "items": int(sample.gold.size)},
            queries=len(set(sample.queries.tolist())),
            relevant=int(sample.gold.sum()),
        ),
        split=PlanSplit(
            seed=seed,
            calibration_share=calibration_share,
            calibration_queries=calibration_queries,
            certification_queries=certification_queries,
        ),
        calibrator=calibrator,
        certification=Certification(
            epsilon=epsilon,
            delta=delta,
            method=method,
            scheme=scheme,
            hypotheses=selection.family,
            clusters=clusters if scheme == "nested" else "none",
            certified=band is not None,
            items=int(gold_c.size),
            queries=len(certification_queries),
            auto_labelled=outcome.auto_labelled,
            errors=outcome.errors,
            upper_bound=selection.upper_bound,
            human_share=outcome.human_share if band is not None else 1.0,
        ),
        band=band,
        plain_band=plain,
        plain_human_share=plain_share,
        curve=_curve(calibrated, gold_c, delta),
    )
    return plan.sealed()
