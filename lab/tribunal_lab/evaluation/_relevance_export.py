"""A sweep's relevance judge as the ensemble's relevance artifact (``tribunal.relevance/1``).

The artifact is exactly what the sweep evaluated: the logistic regression fitted on the
selection split (for an ensemble row), the threshold and the cascade band chosen on it;
its test-split figures travel with it under ``metrics``. A single judge exports as a
one-feature logistic regression fitted on the selection split (Platt scaling in the
feature's own units: logit(P(yes)), or the raw cosine), with its threshold and band
carried through that increasing map, so it decides every item exactly as the sweep did.
Every band the artifact records — the one applied and the one its test figures describe —
is on that one scale, the calibrated probability ``p_relevant``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from typing import Any

import numpy as np
from scipy import special
from sklearn.linear_model import LogisticRegression
from tribunal.core import InvalidArgumentError

from ._sweep_stats import Judge, feature_values, stratified_split

__all__ = ["ARTIFACT_FORMAT", "export_relevance"]

ARTIFACT_FORMAT = "tribunal.relevance/1"


def _feature(member: str, judges: dict[str, Judge]) -> dict[str, str]:
    model_key, _, prompt_id = member.partition(":")
    if judges[member].transform == "cosine":
        return {"name": f"{model_key}/cosine", "kind": "cosine", "model_key": model_key}
    prompt_name = prompt_id.split("/", 1)[1].split("@", 1)[0]
    return {
        "name": f"{model_key}/{prompt_name}",
        "kind": "llm_p_yes",
        "model_key": model_key,
        "prompt_id": prompt_id,
    }


def _unit(value: float | None, infinite: float) -> float:
    """A threshold or band edge on [0, 1]; ±∞ (stored as null) becomes the bound."""
    if value is None or not math.isfinite(value):
        return infinite
    return min(1.0, max(0.0, float(value)))


def _single(judge: Judge, labels: Any, seed: int) -> tuple[float, float]:
    """(slope, intercept) of a one-feature logistic regression on the selection split."""
    y = np.asarray(labels, dtype=np.int64)
    selection, _ = stratified_split(y, seed)
    x = feature_values(judge)[selection, None]
    model = LogisticRegression(C=1e6, max_iter=1000).fit(x, y[selection])
    slope, intercept = float(model.coef_[0][0]), float(model.intercept_[0])
    if slope <= 0:
        raise InvalidArgumentError(
            f"{judge.name}: a higher score means less relevant on selection (slope {slope}): "
            "it cannot be exported as a relevance judge",
            field="export_judge",
        )
    return slope, intercept


def _mapped(value: float | None, judge: Judge, slope: float, intercept: float) -> float | None:
    """A threshold on the judge's own scale carried into p_relevant (None stays None)."""
    if value is None or not math.isfinite(value):
        return value
    one = Judge(judge.name, judge.kind, judge.members, np.array([value]), judge.seconds[:1],
                judge.tokens[:1], transform=judge.transform)  # fmt: skip
    return float(special.expit(slope * feature_values(one)[0] + intercept))


def export_relevance(
    report: dict[str, Any],
    judges: dict[str, Judge],
    name: str,
    *,
    labels: Any,
    backend: str,
) -> dict[str, Any]:
    """The artifact of judge row ``name`` of a relevance sweep ``report`` (whose items had
    gold ``labels``, in the sweep's order).

    Raises:
        InvalidArgumentError: no such row, or a single judge whose score falls as
            relevance rises.
    """
    rows = {row["judge"]: row for row in report["judges"]}
    if name not in rows:
        raise InvalidArgumentError(
            f"--export-judge {name!r} is not a row of this sweep; rows: {', '.join(rows)}",
            field="export_judge",
        )
    row = rows[name]
    members = list(row["members"])
    selection = row["selection"]
    band = dict(selection.get("band") or {})
    threshold = selection["threshold"]
    if row["ensemble_weights"]:
        coef = [float(c) for c in row["ensemble_weights"]["coef"]]
        intercept = float(row["ensemble_weights"]["intercept"])
    else:
        judge = judges[members[0]]
        slope, intercept = _single(judge, labels, report["split"]["seed"])
        coef = [slope]
        threshold = _mapped(threshold, judge, slope, intercept)
        band = {k: _mapped(band.get(k), judge, slope, intercept) for k in ("low", "high")}
    low = _unit(band.get("low"), 0.0)
    high = _unit(band.get("high"), 1.0)
    body: dict[str, Any] = {
        "features": [_feature(m, judges) for m in members],
        "coef": coef,
        "intercept": intercept,
        "threshold": _unit(threshold, 1.0),
        "band": {"low": low, "high": max(low, high)},
        "backend": backend,
    }
    version = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    test = row["test"]
    cascade = test.get("cascade")
    if cascade is not None:
        # The test figures were computed on the judge's own scale; the band they describe
        # is recorded on the artifact's one scale, p_relevant (the same increasing map).
        cascade = {**cascade, "band": dict(body["band"])}
    return {
        "format": ARTIFACT_FORMAT,
        "version": version,
        **body,
        "fitted_on": {
            "data": f"{report.get('data', 'trec-dl-2019 dl19_judged_pairs (grade >= 2)')}, "
            "selection split",
            "n": report["split"]["selection"]["n"],
            "seed": report["split"]["seed"],
            "judge": name,
            "command": report["command"],
            "date": dt.date.today().isoformat(),
        },
        "metrics": {
            "split": "test",
            "n": report["split"]["test"]["n"],
            "balanced_accuracy": test["balanced_accuracy"],
            "auroc": test["auroc"],
            "cascade": cascade,
        },
    }
