"""What ``tribunal eval matching-features`` hands to the product: the fitted matcher and
the labelled signals its confidence calibrator is fitted on.

The artifact is the evaluation's ``logistic(embedding)`` scorer exactly as fitted on the
selection half (standardisation, weights, max-accuracy threshold), with the test half's
figures; the signals are the artifact's own P(match) on the test half's items, which it
never saw — so ``tribunal confidence fit`` on them calibrates and picks risk thresholds
on data independent of the regression.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..confidence import json_ready
from ..ensemble import FeatureEmbedder, MatchFeaturesArtifact

if TYPE_CHECKING:
    from ..ensemble import MatchItem
    from .matching_features import FeatureTable, Ints

__all__ = ["LOGISTIC_SCORER", "matcher_artifact", "write_test_signals"]

LOGISTIC_SCORER = "logistic(embedding)"
"""The scorer of scope ``all`` that becomes the artifact."""


def matcher_artifact(
    result: dict[str, Any], *, embedder_key: str, embedder_name: str, dataset: str
) -> MatchFeaturesArtifact:
    """The feature matcher fitted by :func:`evaluate_table` (its ``result``), sealed."""
    row = result["scopes"]["all"][LOGISTIC_SCORER]
    fitted = row["fitted_on_selection"]
    model = fitted["model"]
    test = row["test"]
    return MatchFeaturesArtifact(
        embedder=FeatureEmbedder(model_key=embedder_key, name=embedder_name),
        features=tuple(model["features"]),
        mean=tuple(model["mean"]),
        std=tuple(model["std"]),
        coef=tuple(model["coef"]),
        intercept=model["intercept"],
        threshold=float(fitted["thresholds"]["max-accuracy"]),
        fitted_on={
            "dataset": dataset,
            "seed": result["seed"],
            "fraction": result["fraction"],
            "selection": result["split"]["selection"],
            "selection_auroc": fitted["selection_auroc"],
        },
        metrics=json_ready(
            {
                "test": {
                    "items": test["n"],
                    "positives": test["positives"],
                    "auroc": test["auroc"],
                    "max-accuracy": test["max-accuracy"],
                },
                "thresholds_on_selection": fitted["thresholds"],
            }
        ),
    ).sealed()


def write_test_signals(
    path: Path,
    artifact: MatchFeaturesArtifact,
    table: FeatureTable,
    test: Ints,
    items: Sequence[MatchItem],
) -> int:
    """Labelled signals of the test items, one JSONL row each, in the format ``tribunal
    confidence fit`` reads: ``ensemble_p_match`` (the artifact's P(match)) and, for a
    retrieved item, the retrieval scores the gateway would send beside it (an STS-B pair
    has none: the calibrator's missing-value columns keep it apart). Returns the count."""
    p_match = artifact.p_match({name: table.features[name][test] for name in artifact.features})
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for row, p in zip(test.tolist(), p_match.tolist(), strict=True):
            assert items[row].id == table.ids[row], "items and table rows differ"
            record = {
                "id": table.ids[row],
                "source": table.sources[row],
                "signals": {
                    **items[row].retrieval_signals(),
                    "ensemble_p_match": float(np.clip(p, 0.0, 1.0)),
                },
                "label": int(table.labels[row]),
            }
            out.write(json.dumps(record) + "\n")
    return int(test.size)
