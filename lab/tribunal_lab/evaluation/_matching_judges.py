"""LLM judges' verdicts as matching features: does an LLM add to the cheap features?

``tribunal-lab eval matching-features --judges llm_strong/ral2m ...`` reads the judges'
P(yes) from the matching set's judgment files (``tribunal-lab dataset matching``) and
adds ``judge:<name>`` = logit(P(yes)) beside the embedding features, so the same split,
regressions and operating points compare "features" with "features + judges".
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tribunal.core import FailedPreconditionError
from tribunal.ensemble import load_matching_data

from ._matching_table import FeatureTable
from ._sweep_stats import logit

__all__ = ["JUDGE_PREFIX", "add_judge_features"]

JUDGE_PREFIX = "judge:"


def add_judge_features(table: FeatureTable, dataset: Path, judges: Sequence[str]) -> FeatureTable:
    """``table`` with one ``judge:<name>`` column per judge.

    Raises:
        FailedPreconditionError: a judge has no judgments, or has not judged every item
            (the comparison needs all of them; rerun ``tribunal-lab dataset matching`` to finish).
    """
    data = load_matching_data(dataset, judges)
    if data.skipped:
        raise FailedPreconditionError(
            f"{data.skipped} of {len(table.ids)} items are not judged yet by all of "
            f"{list(judges)}; finish them with `tribunal-lab dataset matching --models ...`",
            field="judges",
        )
    row = {item.id: i for i, item in enumerate(data.items)}
    order = [row[item_id] for item_id in table.ids]
    features = dict(table.features)
    for column, name in enumerate(data.judges):
        features[JUDGE_PREFIX + name] = logit(data.p_yes[order, column].astype(np.float64))
    return FeatureTable(table.ids, table.sources, table.groups, table.labels, features)
