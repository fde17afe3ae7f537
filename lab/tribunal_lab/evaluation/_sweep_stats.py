"""The statistics of ``tribunal-lab eval sweep``: split, fit on selection, report on test.

Everything here is pure numpy / scikit-learn on a table of P(yes) per item and
judge, so it is tested exactly on synthetic tables. The rule that makes the
reported figures honest: every fitted thing (calibrators, threshold, cascade band,
ensemble weights, the winner) sees only the selection indices; the test indices are
touched only by :func:`report_on_test`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import special
from scipy.stats import rankdata
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from tribunal.core import InvalidArgumentError
from tribunal.core.metrics import (
    ConfidenceInterval,
    balanced_accuracy,
    bootstrap_ci,
    expected_calibration_error,
)

__all__ = [
    "Band",
    "Fitted",
    "Judge",
    "auroc",
    "balanced_accuracy",
    "cascade_predict",
    "feature_values",
    "fit_judge",
    "logit",
    "oof_ensemble",
    "report_on_test",
    "select_band",
    "select_threshold",
    "stratified_split",
]

_EPSILON = 1e-6

Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


def auroc(y: Ints, p: Floats) -> float:
    """Mann-Whitney AUROC (ties count one half); NaN with one class."""
    positives = int(y.sum())
    negatives = y.size - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    ranks = rankdata(p)
    return float((ranks[y == 1].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def logit(p: Floats) -> Floats:
    """logit(P(yes)), clipped to [ε, 1 − ε] so that 0 and 1 stay finite."""
    result: Floats = special.logit(np.clip(np.asarray(p, dtype=np.float64), _EPSILON, 1 - _EPSILON))
    return result


def stratified_split(labels: Ints, seed: int, fraction: float = 0.5) -> tuple[Ints, Ints]:
    """Disjoint (selection, test) indices, stratified by label, both sorted.

    Of the ``n_c`` items of class ``c``, ``round(n_c · fraction)`` (Python rounding)
    go to selection, drawn with ``numpy.random.default_rng(seed)``; the rest to test.

    Raises:
        InvalidArgumentError: a class would leave either half empty.
    """
    y = np.asarray(labels, dtype=np.int64)
    rng = np.random.default_rng(seed)
    selection: list[int] = []
    for value in (0, 1):
        members = np.flatnonzero(y == value)
        take = round(members.size * fraction)
        if take < 1 or take >= members.size:
            raise InvalidArgumentError(
                f"class {value} has {members.size} item(s): too few to put some in both the "
                f"selection and the test split; sample more pairs (--pairs)",
                field="pairs",
            )
        selection.extend(rng.permutation(members)[:take].tolist())
    chosen = np.zeros(y.size, dtype=bool)
    chosen[selection] = True
    return np.flatnonzero(chosen).astype(np.int64), np.flatnonzero(~chosen).astype(np.int64)


def _cut_points(scores: Floats) -> Floats:
    """-inf, the midpoints between consecutive distinct scores, +inf."""
    distinct = np.unique(scores)
    return np.concatenate(([-np.inf], (distinct[:-1] + distinct[1:]) / 2, [np.inf]))


def select_threshold(y: Ints, p: Floats) -> float:
    """The cut (a midpoint between distinct scores) maximising balanced accuracy of
    ``p ≥ cut``; ties go to the cut nearest the median score (the least extreme)."""
    cuts = _cut_points(p)
    scores = np.array([balanced_accuracy(y, (p >= c).astype(np.int64)) for c in cuts])
    best = np.flatnonzero(np.isclose(scores, scores.max(), rtol=0, atol=1e-12))
    middle = float(np.median(p))
    finite = np.where(np.isfinite(cuts[best]), cuts[best], np.sign(cuts[best]) * 1e9)
    return float(cuts[best[int(np.argmin(np.abs(finite - middle)))]])


@dataclass(frozen=True)
class Band:
    """The cascade's uncertain band: ``low ≤ p < high`` escalates; above decides yes."""

    low: float
    high: float

    def as_dict(self) -> dict[str, float]:
        return {"low": self.low, "high": self.high}


def cascade_predict(p: Floats, band: Band) -> tuple[Ints, NDArray[np.bool_]]:
    """(decision, escalated): decision = ``p ≥ high`` (meaningful where not escalated)."""
    escalated = (p >= band.low) & (p < band.high)
    return (p >= band.high).astype(np.int64), escalated


def _cascade_bacc(y: Ints, p: Floats, band: Band) -> float:
    decision, escalated = cascade_predict(p, band)
    kept = ~escalated
    # Over the classes present among the kept items; NaN when all are escalated.
    return balanced_accuracy(y[kept], decision[kept])


def select_band(y: Ints, p: Floats, max_escalation: float) -> Band:
    """The band escalating at most ``max_escalation`` of the items that maximises
    balanced accuracy on the items it keeps.

    Candidates are every run of consecutive distinct scores (edges at midpoints),
    including the empty band (a plain threshold). Ties go to the band that escalates
    fewer items, then to the lower band. O(m²) in the m distinct scores.
    """
    if not 0 <= max_escalation < 1:
        raise InvalidArgumentError("the escalation cap must be in [0, 1)", field="max_escalation")
    distinct, inverse = np.unique(p, return_inverse=True)
    m = distinct.size
    positives = np.bincount(inverse, weights=y, minlength=m)
    counts = np.bincount(inverse, minlength=m).astype(np.float64)
    negatives = counts - positives
    # cum[k] = sum over distinct values 0..k-1
    cum_pos = np.concatenate(([0.0], np.cumsum(positives)))
    cum_neg = np.concatenate(([0.0], np.cumsum(negatives)))
    total_pos, total_neg, n = cum_pos[-1], cum_neg[-1], float(y.size)
    cuts = _cut_points(p)
    best: tuple[float, float, int, int] | None = None  # (-bacc, escalated, i, j)
    for i in range(m + 1):
        for j in range(i, m + 1):
            escalated = (cum_pos[j] - cum_pos[i]) + (cum_neg[j] - cum_neg[i])
            if escalated > max_escalation * n + 1e-9:
                break
            kept_pos = total_pos - (cum_pos[j] - cum_pos[i])
            kept_neg = total_neg - (cum_neg[j] - cum_neg[i])
            if kept_pos == 0 or kept_neg == 0:
                continue
            # values below i say no, values from j on say yes
            recall_pos = (total_pos - cum_pos[j]) / kept_pos
            recall_neg = cum_neg[i] / kept_neg
            key = (-round((recall_pos + recall_neg) / 2, 12), escalated, i, j)
            if best is None or key < best:
                best = key
    if best is None:
        raise InvalidArgumentError("no band keeps both classes", field="max_escalation")
    _, _, i, j = best
    return Band(float(cuts[i]), float(cuts[j]))


def oof_ensemble(
    x: Floats, y: Ints, selection: Ints, *, seed: int, folds: int = 5
) -> tuple[Floats, dict[str, Any]]:
    """Logistic regression over the members' features (:func:`feature_values`: logit
    P(yes), or a raw cosine), fitted on selection.

    Returns P(yes) of the ensemble for every item: on selection items the out-of-fold
    prediction (so threshold, band and calibrators fitted on them see what unseen items
    look like), elsewhere the model fitted on the whole selection; and that model's
    weights.
    """
    out = np.zeros(y.size)
    sel_x, sel_y = x[selection], y[selection]
    model = LogisticRegression(max_iter=1000).fit(sel_x, sel_y)
    # Every fold needs both classes: fewer folds on a small selection split, and the
    # in-sample fit when a class has a single item.
    folds = min(folds, int(np.bincount(sel_y, minlength=2).min()))
    if folds < 2:
        out[selection] = model.predict_proba(sel_x)[:, 1]
    else:
        splitter = StratifiedKFold(n_splits=folds, shuffle=True, random_state=seed)
        for fit, apply in splitter.split(sel_x, sel_y):
            one = LogisticRegression(max_iter=1000).fit(sel_x[fit], sel_y[fit])
            out[selection[apply]] = one.predict_proba(sel_x[apply])[:, 1]
    rest = np.setdiff1d(np.arange(y.size), selection)
    if rest.size:
        out[rest] = model.predict_proba(x[rest])[:, 1]
    weights = {
        "folds": folds,
        "coef": [float(v) for v in model.coef_[0]],
        "intercept": float(model.intercept_[0]),
    }
    return out, weights


@dataclass(frozen=True)
class Judge:
    """One row of the sweep: a single (model, prompt) judge or an ensemble of them."""

    name: str
    kind: str
    """``single``, ``self-ensemble`` (one model, several prompts) or ``cross-model``."""
    members: tuple[str, ...]
    p_yes: Floats
    seconds: Floats
    tokens: Floats
    weights: dict[str, Any] | None = None
    transform: str = "logit"
    """How the score enters an ensemble: ``logit`` (of P(yes)) or ``cosine`` (the judge is
    an embedding cosine, stored as (1 + cos) / 2 so thresholds and AUROC read alike)."""


def feature_values(judge: Judge) -> Floats:
    """The judge's score as a logistic-regression feature: logit(P(yes)), or the raw
    cosine in [-1, 1] (what the relevance artifact's ``cosine`` feature expects)."""
    if judge.transform == "cosine":
        raw: Floats = 2 * np.asarray(judge.p_yes, dtype=np.float64) - 1
        return raw
    return logit(judge.p_yes)


@dataclass(frozen=True)
class Fitted:
    """What was chosen on the selection split for one judge."""

    threshold: float
    band: Band | None
    platt: tuple[float, float]
    """(slope, intercept) on logit(P(yes))."""
    isotonic: IsotonicRegression
    selection_bacc: float
    selection_cascade_bacc: float | None
    selection_escalation: float | None
    selection_auroc: float

    def calibrated(self, p: Floats) -> dict[str, Floats]:
        slope, intercept = self.platt
        platt: Floats = special.expit(slope * logit(p) + intercept)
        isotonic: Floats = np.asarray(self.isotonic.predict(p), dtype=np.float64)
        return {"raw": np.asarray(p, dtype=np.float64), "platt": platt, "isotonic": isotonic}

    def as_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "band": self.band.as_dict() if self.band else None,
            "platt": {"slope": self.platt[0], "intercept": self.platt[1]},
            "selection_balanced_accuracy": self.selection_bacc,
            "selection_cascade_balanced_accuracy": self.selection_cascade_bacc,
            "selection_escalation": self.selection_escalation,
            "selection_auroc": self.selection_auroc,
        }


def fit_judge(y: Ints, p: Floats, *, max_escalation: float | None) -> Fitted:
    """Threshold, cascade band (when ``max_escalation`` is given), Platt and isotonic
    calibration, all fitted on ``(y, p)`` — pass the selection split only."""
    threshold = select_threshold(y, p)
    platt_model = LogisticRegression(C=1e6, max_iter=1000).fit(logit(p)[:, None], y)
    isotonic = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip").fit(p, y)
    band = select_band(y, p, max_escalation) if max_escalation is not None else None
    escalation = float(cascade_predict(p, band)[1].mean()) if band else None
    return Fitted(
        threshold=threshold,
        band=band,
        platt=(float(platt_model.coef_[0][0]), float(platt_model.intercept_[0])),
        isotonic=isotonic,
        selection_bacc=balanced_accuracy(y, (p >= threshold).astype(np.int64)),
        selection_cascade_bacc=_cascade_bacc(y, p, band) if band else None,
        selection_escalation=escalation,
        selection_auroc=auroc(y, p),
    )


def _mean_ci(values: Floats, *, n_resamples: int, seed: int) -> ConfidenceInterval:
    """Percentile bootstrap of a mean of non-negative costs (seconds, tokens)."""
    rng = np.random.default_rng(seed)
    means = [values[rng.integers(0, values.size, values.size)].mean() for _ in range(n_resamples)]
    low, high = np.percentile(means, [2.5, 97.5])
    return ConfidenceInterval(float(values.mean()), float(low), float(high), 0.95)


def _ci(
    metric: Callable[[Ints, Floats], float], y: Ints, p: Floats, n_resamples: int, seed: int
) -> dict[str, float]:
    ci = bootstrap_ci(metric, y, p, n_resamples=n_resamples, seed=seed)
    return {"value": ci.value, "low": ci.low, "high": ci.high}


def report_on_test(
    judge: Judge,
    fitted: Fitted,
    y: Ints,
    test: Sequence[int] | Ints,
    *,
    n_resamples: int = 1000,
    seed: int = 0,
) -> dict[str, Any]:
    """The judge's figures on the test indices, with 95% bootstrap intervals."""
    index = np.asarray(test, dtype=np.int64)
    truth, p = y[index], judge.p_yes[index]
    threshold = fitted.threshold

    def bacc_at(cut: float) -> Callable[[Ints, Floats], float]:
        return lambda t, s: balanced_accuracy(t, (s >= cut).astype(np.int64))

    def recall(value: int) -> float:
        chosen = truth == value
        return float(((p[chosen] >= threshold).astype(np.int64) == value).mean())

    calibrated = fitted.calibrated(p)
    report: dict[str, Any] = {
        "n": int(index.size),
        "positives": int(truth.sum()),
        "balanced_accuracy": _ci(bacc_at(threshold), truth, p, n_resamples, seed),
        "recall_positive": recall(1),
        "recall_negative": recall(0),
        "balanced_accuracy_at_0.5": balanced_accuracy(truth, (p >= 0.5).astype(np.int64)),
        "auroc": _ci(auroc, truth, p, n_resamples, seed),
        "ece": {
            kind: _ci(expected_calibration_error, truth, values, n_resamples, seed)
            for kind, values in calibrated.items()
        },
        "seconds_per_item": asdict(
            _mean_ci(judge.seconds[index], n_resamples=n_resamples, seed=seed)
        ),
        "tokens_per_item": asdict(
            _mean_ci(judge.tokens[index], n_resamples=n_resamples, seed=seed)
        ),
    }
    if fitted.band is not None:
        band = fitted.band
        report["cascade"] = {
            "band": band.as_dict(),
            "balanced_accuracy_kept": _ci(
                lambda t, s: _cascade_bacc(t, s, band), truth, p, n_resamples, seed
            ),
            "escalation": _ci(
                lambda t, s: float(cascade_predict(s, band)[1].mean()),
                truth,
                p,
                n_resamples,
                seed,
            ),
        }
    return report
