"""A sweep's relevance judge as the ensemble's relevance artifact (``tribunal.relevance/1``).

The artifact is exactly what the sweep evaluated: the logistic regression fitted on the
selection split (for an ensemble row), the threshold and the cascade band chosen on it;
its test-split figures travel with it under ``metrics``. A single LLM judge exports as
coefficient 1 on logit(P(yes)) (p_relevant = P(yes)).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from typing import Any

from tribunal.core import InvalidArgumentError

from ._sweep_stats import Judge

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


def export_relevance(
    report: dict[str, Any], judges: dict[str, Judge], name: str, *, backend: str
) -> dict[str, Any]:
    """The artifact of judge row ``name`` of a relevance sweep ``report``.

    Raises:
        InvalidArgumentError: no such row, or a row that cannot be served (the cosine
            alone: its score is not a probability).
    """
    rows = {row["judge"]: row for row in report["judges"]}
    if name not in rows:
        raise InvalidArgumentError(
            f"--export-judge {name!r} is not a row of this sweep; rows: {', '.join(rows)}",
            field="export_judge",
        )
    row = rows[name]
    members = list(row["members"])
    if row["ensemble_weights"]:
        coef = [float(c) for c in row["ensemble_weights"]["coef"]]
        intercept = float(row["ensemble_weights"]["intercept"])
    elif judges[members[0]].transform == "logit":
        coef, intercept = [1.0], 0.0
    else:
        raise InvalidArgumentError(
            f"{name} alone is a cosine, not a probability: export an ensemble that uses it",
            field="export_judge",
        )
    selection = row["selection"]
    band = selection.get("band") or {}
    low = _unit(band.get("low"), 0.0)
    high = _unit(band.get("high"), 1.0)
    body: dict[str, Any] = {
        "features": [_feature(m, judges) for m in members],
        "coef": coef,
        "intercept": intercept,
        "threshold": _unit(selection["threshold"], 1.0),
        "band": {"low": low, "high": max(low, high)},
        "backend": backend,
    }
    version = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:12]
    test = row["test"]
    return {
        "format": ARTIFACT_FORMAT,
        "version": version,
        **body,
        "fitted_on": {
            "data": "trec-dl-2019 dl19_judged_pairs (grade >= 2), selection split",
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
            "cascade": test.get("cascade"),
        },
    }
