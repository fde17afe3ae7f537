"""The matching set as a feature table, and the split the matching evaluation uses.

Kept apart from the evaluation (``matching_features``) so the modules that hand its
results to the product (``_matching_artifact``, ``_matching_judges``) import the table
without the evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray
from tribunal.core import InvalidArgumentError
from tribunal.ensemble import MATCH_FEATURES

if TYPE_CHECKING:
    from tribunal.embedding import Embedder
    from tribunal.ensemble import MatchItem

__all__ = [
    "COVID_SOURCES",
    "EMBEDDING_FEATURES",
    "RETRIEVAL_FEATURES",
    "FeatureTable",
    "Floats",
    "Ints",
    "Scorer",
    "compute_features",
    "grouped_stratified_split",
]

EMBEDDING_FEATURES = MATCH_FEATURES
RETRIEVAL_FEATURES = ("dense_score", "bm25_score", "rrf_score")
_RETRIEVAL_KEYS = {"dense_score": "dense_score", "bm25_score": "sparse_score", "rrf_score": "score"}
COVID_SOURCES = ("covid-qa", "covid-qa-heldout")


Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


@dataclass(frozen=True)
class FeatureTable:
    """One row per item: its features (NaN where an item lacks one), label, source, group."""

    ids: tuple[str, ...]
    sources: tuple[str, ...]
    groups: tuple[str, ...]
    labels: Ints
    features: dict[str, Floats]

    def __post_init__(self) -> None:
        n = len(self.ids)
        sizes = {len(self.sources), len(self.groups), self.labels.size}
        sizes |= {v.size for v in self.features.values()}
        if sizes != {n}:
            raise InvalidArgumentError(f"feature table columns differ in length: {sizes}")


@dataclass(frozen=True)
class Scorer:
    """A score to threshold: one feature, or logistic regression over several."""

    name: str
    features: tuple[str, ...]
    kind: str
    """``feature`` (the raw value) or ``logistic`` (P(match) of an LR over ``features``)."""


def compute_features(
    items: Sequence[MatchItem], embedder: Embedder, *, progress: bool = False
) -> FeatureTable:
    """Embedding cosines, token-set ratio and the stored retrieval scores of each item."""
    from tribunal.ensemble import match_feature_values

    features = match_feature_values(
        [i.query for i in items],
        [i.candidate.question for i in items],
        [i.candidate.answer for i in items],
        embedder,
        progress=progress,
    )
    for name, key in _RETRIEVAL_KEYS.items():
        features[name] = np.array([i.retrieval.get(key, math.nan) for i in items], np.float64)
    return FeatureTable(
        tuple(i.id for i in items),
        tuple(i.source for i in items),
        tuple(i.group for i in items),
        np.array([i.label for i in items], dtype=np.int64),
        features,
    )


def grouped_stratified_split(
    sources: Sequence[str], labels: Ints, groups: Sequence[str], seed: int, fraction: float = 0.5
) -> tuple[Ints, Ints]:
    """Disjoint sorted (selection, test) indices; a group never straddles them.

    A group's stratum is its sorted (source, label) make-up; strata are taken in sorted
    order, each one's groups shuffled by one ``default_rng(seed)`` and the first
    ``round(n · fraction)`` put in selection. (``_sweep_stats.stratified_split`` does
    labels only and needs both classes, which the all-negative held-out source lacks.)
    """
    members: dict[str, list[int]] = {}
    for index, group in enumerate(groups):
        members.setdefault(group, []).append(index)
    strata: dict[tuple[tuple[str, int], ...], list[str]] = {}
    for group, rows in members.items():
        key = tuple(sorted((sources[i], int(labels[i])) for i in rows))
        strata.setdefault(key, []).append(group)
    rng = np.random.default_rng(seed)
    chosen = np.zeros(len(groups), dtype=bool)
    for key in sorted(strata):
        names = sorted(strata[key])
        take = round(len(names) * fraction)
        for position in rng.permutation(len(names))[:take]:
            chosen[members[names[position]]] = True
    return np.flatnonzero(chosen).astype(np.int64), np.flatnonzero(~chosen).astype(np.int64)
