"""What ``tribunal-lab eval matching-features`` hands to the product: the fitted matcher and
the labelled signals its confidence calibrator is fitted on.

The artifact is the evaluation's ``logistic(embedding)`` scorer exactly as fitted on the
selection half (standardisation, weights, max-accuracy threshold), with the test half's
figures; the signals are P(match) of items the regression never saw (test items: the
artifact's own; selection items: out-of-fold), so ``tribunal confidence fit`` on them
calibrates and picks risk thresholds on data independent of the regression.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from tribunal.confidence import json_ready
from tribunal.ensemble import FeatureEmbedder, MatchFeaturesArtifact

if TYPE_CHECKING:
    from tribunal.ensemble import MatchItem

    from ._matching_table import FeatureTable, Floats, Ints

__all__ = ["LOGISTIC_SCORER", "matcher_artifact", "write_signals"]

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


def write_signals(
    path: Path,
    artifact: MatchFeaturesArtifact,
    table: FeatureTable,
    *,
    split: tuple[Ints, Ints],
    oof: tuple[Ints, Floats],
    items: Sequence[MatchItem],
    sources: Sequence[str] | None = None,
) -> dict[str, int]:
    """Labelled signals, one JSONL row per item of ``sources`` (default: all), in the
    format ``tribunal confidence fit`` reads.

    ``ensemble_p_match`` is a P(match) from a regression that never saw the item: the
    artifact's own on test items, the out-of-fold one (``oof``: the evaluation's
    indices and scores) on selection items — so a calibrator fitted on these rows
    learns what the served P(match) means on new items. A retrieved item also carries
    the retrieval scores the gateway would send beside it. Returns the rows per split.
    """
    selection, test = split
    served = artifact.p_match({name: table.features[name] for name in artifact.features})
    scope, scores = oof
    out_of_fold = dict(zip(scope.tolist(), scores.tolist(), strict=True))
    wanted = set(sources) if sources is not None else set(table.sources)
    counts = {"selection": 0, "test": 0}
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for part, rows in (("selection", selection), ("test", test)):
            for row in rows.tolist():
                if table.sources[row] not in wanted:
                    continue
                assert items[row].id == table.ids[row], "items and table rows differ"
                p = out_of_fold[row] if part == "selection" else float(served[row])
                record = {
                    "id": table.ids[row],
                    "source": table.sources[row],
                    "split": part,
                    "signals": {
                        **items[row].retrieval_signals(),
                        "ensemble_p_match": float(np.clip(p, 0.0, 1.0)),
                    },
                    "label": int(table.labels[row]),
                }
                out.write(json.dumps(record) + "\n")
                counts[part] += 1
    return counts
