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
2. *Calibrate.* Platt scaling on the calibration part: P = sigmoid(a · logit(p) + b),
   p the judge's P(relevant), fitted with scikit-learn's logistic regression; a > 0 is
   required (a judge whose score falls with relevance is refused).
3. *Certify a band* on the certification part with the confidence service's risk
   control (:func:`tribunal.confidence.select_threshold`). The automatic label of an
   item is RELEVANT when its calibrated P ≥ 0.5; it is kept when its certainty
   max(P, 1 − P) is ≥ λ, i.e. P ≥ λ or P ≤ 1 − λ. Bands are therefore nested,
   centred on P = 0.5 — for a calibrated P, the items nearest 0.5 are the likeliest
   wrong, so for any human share this band has the fewest expected errors — and
   accepting at λ is the same as accepting at confidence ≥ λ with "correct" meaning
   "the automatic label equals the gold one". The methods (``ltt``, the default:
   Learn-then-Test with binomial p-values on a fixed 0.02 grid, tested in fixed
   sequence from the widest band down; ``clopper-pearson``; ``ltt-hb``; ``sgr``) all
   return the narrowest band whose error is ≤ ε with probability ≥ 1 − δ
   (``scheme="nested"``).
   ``scheme="grid"`` instead tests every (low, high) pair of a fixed 0.05 grid of
   calibrated thresholds, asymmetric bands included, each with the confidence service's
   binomial p-value at level δ / (number of pairs) (Bonferroni), and keeps the certified
   pair with the fewest items for humans.
4. *Map back.* The calibrator is strictly increasing, so calibrated thresholds are
   judge thresholds: ``relevant_at`` = p where the calibrated P equals the upper
   threshold, ``irrelevant_at`` likewise. A label job compares the judge's own
   P(relevant) with them.

**Guarantee and its assumption.** As for every method of the confidence service:
items labelled later must be exchangeable with the certification items (drawn from the
same distribution). Items of one query are alike, so a new set of queries differs more
from the sample than a new draw of items would; the binomial tests count items, not
queries, and do not widen for that. Plan on a sample of many queries, drawn like the
queries to be labelled.
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

from ..confidence import (
    RISK_METHODS,
    binomial_p_value,
    clopper_pearson_upper,
    select_threshold,
    threshold_grid,
)
from ..core import InvalidArgumentError
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

__all__ = [
    "DEFAULT_CALIBRATION_SHARE",
    "DEFAULT_CALIBRATOR",
    "DEFAULT_METHOD",
    "GRID_STEP",
    "BandOutcome",
    "CalibratorKind",
    "Scheme",
    "apply_band",
    "band_outcome",
    "calibrate",
    "fit_plan",
]

Scheme = Literal["nested", "grid"]
CalibratorKind = Literal["platt", "isotonic"]
DEFAULT_METHOD = "ltt"
DEFAULT_CALIBRATOR: CalibratorKind = "platt"
DEFAULT_CALIBRATION_SHARE = 0.3
GRID_STEP = 0.05
"""Spacing of the ``grid`` scheme's calibrated thresholds (0.05, 0.10, …, 0.95)."""
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
    assert calibrator.coef is not None and calibrator.intercept is not None
    result: NDArray[np.float64] = special.expit(calibrator.coef * _logit(p) + calibrator.intercept)
    return result


def _judge_threshold(calibrator: PlanCalibrator, calibrated: float, side: str) -> float | None:
    """The judge score where the calibrated P reaches ``calibrated``: the lowest score with
    calibrated P ≥ it (``side="high"``) or the highest with P ≤ it (``"low"``); None when
    no score does."""
    if calibrator.kind == "platt":
        assert calibrator.coef is not None and calibrator.intercept is not None
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


def _fit_platt(sample: _Sample, queries: int) -> PlanCalibrator:
    from sklearn.linear_model import LogisticRegression

    _check_classes(sample)
    x = _logit(sample.scores).reshape(-1, 1)
    # Newton steps: exact and fast for one feature (lbfgs takes tens of iterations).
    model = LogisticRegression(C=1e4, solver="newton-cholesky", max_iter=100).fit(x, sample.gold)
    coef, intercept = float(model.coef_[0, 0]), float(model.intercept_[0])
    if coef <= 0:
        raise InvalidArgumentError(
            f"the judge's P(relevant) does not rise with the gold labels on the {queries} "
            f"calibration queries ({sample.gold.size} items): plan on a sample of more queries "
            "(or a larger --calibration-share); if it persists, this judge cannot label this "
            "data automatically",
            field="input",
        )
    return PlanCalibrator(
        kind="platt", coef=coef, intercept=intercept, items=int(sample.gold.size), queries=queries
    )


def _fit_isotonic(sample: _Sample, queries: int) -> PlanCalibrator:
    from sklearn.isotonic import IsotonicRegression

    _check_classes(sample)
    model = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(
        sample.scores, sample.gold
    )
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


@dataclass(frozen=True)
class BandOutcome:
    """What a band does to labelled items."""

    items: int
    auto_labelled: int
    errors: int
    """Automatic labels that differ from the gold ones."""

    @property
    def human_share(self) -> float:
        return 1.0 - self.auto_labelled / self.items if self.items else 0.0

    @property
    def error(self) -> float | None:
        return self.errors / self.auto_labelled if self.auto_labelled else None


def apply_band(scores: ArrayLike, relevant_at: float, irrelevant_at: float) -> NDArray[np.int64]:
    """Per item: 1 RELEVANT, 0 IRRELEVANT, -1 humans — the label job's rule on judge P."""
    p = np.asarray(scores, dtype=np.float64)
    out = np.full(p.shape, -1, dtype=np.int64)
    out[p <= irrelevant_at] = 0
    out[p >= relevant_at] = 1  # as the pipeline: the upper threshold is checked first
    return out


def band_outcome(
    scores: ArrayLike, gold: ArrayLike, relevant_at: float, irrelevant_at: float
) -> BandOutcome:
    labels = apply_band(scores, relevant_at, irrelevant_at)
    y = np.asarray(gold)
    auto = labels >= 0
    return BandOutcome(int(y.size), int(auto.sum()), int((labels[auto] != y[auto]).sum()))


def _nested(
    calibrated: NDArray[np.float64],
    gold: NDArray[np.int64],
    epsilon: float,
    delta: float,
    method: str,
) -> tuple[float | None, int, Any]:
    """The confidence service's threshold on certainty max(P, 1 − P)."""
    certainty = np.maximum(calibrated, 1.0 - calibrated)
    correct = (gold == (calibrated >= 0.5)).astype(np.int64)
    chosen = select_threshold(certainty, correct, alpha=epsilon, delta=delta, method=method)
    high = None if chosen.threshold is None else max(0.5, float(chosen.threshold))
    if method in ("ltt", "ltt-hb"):
        family = int((threshold_grid() >= 0.5).sum())
    else:
        family = max(1, int(np.unique(certainty).size))
    return high, family, chosen


def _grid_pairs() -> list[tuple[float, float]]:
    steps = round(0.5 / GRID_STEP)
    lows = [round(GRID_STEP * k, 10) for k in range(1, steps + 1)]
    highs = [round(0.5 + GRID_STEP * k, 10) for k in range(steps)]
    return [(low, high) for low in lows for high in highs]


def _grid(
    calibrated: NDArray[np.float64], gold: NDArray[np.int64], epsilon: float, delta: float
) -> tuple[tuple[float, float] | None, int, float | None]:
    """Bonferroni over every (low, high) pair; the certified pair with most automatic labels."""
    pairs = _grid_pairs()
    level = delta / len(pairs)
    relevant = gold == 1
    best: tuple[int, float, float, float] | None = None
    for low, high in pairs:
        upper = calibrated >= high
        lower = (calibrated <= low) & ~upper  # the upper threshold wins a tie, as in apply_band
        auto = int(upper.sum() + lower.sum())
        if auto == 0 or (best is not None and auto <= best[0]):
            continue
        errors = int((upper & ~relevant).sum() + (lower & relevant).sum())
        if binomial_p_value(errors, auto, epsilon) > level:
            continue
        best = (auto, low, high, clopper_pearson_upper(errors, auto, level))
    if best is None:
        return None, len(pairs), None
    return (best[1], best[2]), len(pairs), best[3]


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
    if calibrator_kind not in ("platt", "isotonic"):
        raise InvalidArgumentError(
            f"calibrator must be platt or isotonic, got {calibrator_kind!r}", field="calibrator"
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

    band: BandChoice | None = None
    bound: float | None = None
    if scheme == "nested":
        high, hypotheses, chosen = _nested(calibrated, gold_c, epsilon, delta, method)
        if high is not None:
            band, bound = _band(calibrator, 1.0 - high, high), chosen.upper_bound
    else:
        pair, hypotheses, bound = _grid(calibrated, gold_c, epsilon, delta)
        if pair is not None:
            band = _band(calibrator, *pair)
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
            hypotheses=hypotheses,
            certified=band is not None,
            items=int(gold_c.size),
            queries=len(certification_queries),
            auto_labelled=outcome.auto_labelled,
            errors=outcome.errors,
            upper_bound=None if bound is None else float(bound),
            human_share=outcome.human_share if band is not None else 1.0,
        ),
        band=band,
        plain_band=plain,
        plain_human_share=plain_share,
        curve=_curve(calibrated, gold_c, delta),
    )
    return plan.sealed()
