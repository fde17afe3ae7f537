"""Training and evaluating aggregators on the matching set: splits, thresholds, metrics.

- Splits are fixed by a seed: items grouped by query (a query's items stay together),
  groups shuffled per source and label, cut 60 / 20 / 20 into train / validation / test.
- Each judge's vote threshold is the P(yes) cut that maximises its balanced accuracy on
  the training rows (small models' P(yes) is compressed; at 0.5 some never say yes).
- Learned aggregators fit on train; epochs and hyperparameters are chosen on
  validation; test is only reported.
- Metrics are RAL2M's: accuracy, hallucination rate (false positive rate), precision
  and F1 of the positive class.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ._artifact import AGGREGATORS, EnsembleArtifact
from ._base import Aggregator, EnsembleInputs, InputKind
from ._dataset import MatchingData

__all__ = [
    "SplitIndex",
    "ablation",
    "fit_vote_thresholds",
    "make_aggregators",
    "matching_metrics",
    "split_data",
    "summarise",
    "train_artifact",
]


@dataclass(frozen=True)
class SplitIndex:
    train: NDArray[np.int64]
    validation: NDArray[np.int64]
    test: NDArray[np.int64]


def split_data(
    data: MatchingData, seed: int, fractions: tuple[float, float] = (0.6, 0.2)
) -> SplitIndex:
    """Train / validation / test row indices, by query group, stratified by source and label."""
    groups: dict[str, list[int]] = {}
    for index, item in enumerate(data.items):
        groups.setdefault(item.group, []).append(index)
    strata: dict[tuple[str, int], list[str]] = {}
    for name, rows in sorted(groups.items()):
        first = data.items[rows[0]]
        strata.setdefault((first.source, first.label), []).append(name)
    rng = random.Random(seed)
    parts: tuple[list[int], list[int], list[int]] = ([], [], [])
    for key in sorted(strata):
        names = strata[key]
        rng.shuffle(names)
        cut1 = round(fractions[0] * len(names))
        cut2 = cut1 + round(fractions[1] * len(names))
        for position, name in enumerate(names):
            part = 0 if position < cut1 else 1 if position < cut2 else 2
            parts[part].extend(groups[name])
    return SplitIndex(*(np.array(sorted(p), dtype=np.int64) for p in parts))


def fit_vote_thresholds(p_yes: NDArray[Any], labels: NDArray[np.int64]) -> NDArray[np.float64]:
    """Per judge, the P(yes) threshold with the best balanced accuracy on these rows."""
    out = np.empty(p_yes.shape[1], dtype=np.float64)
    positives = max(int(labels.sum()), 1)
    negatives = max(int((1 - labels).sum()), 1)
    for column in range(p_yes.shape[1]):
        values = np.unique(p_yes[:, column].astype(np.float64))
        # Midpoints between observed values (and the ends): votes flip only there.
        cuts = np.concatenate([[0.0], (values[:-1] + values[1:]) / 2, [np.nextafter(1.0, 2.0)]])
        best, best_cut = -1.0, 0.5
        for cut in cuts:
            vote = p_yes[:, column] >= cut
            score = (vote & (labels == 1)).sum() / positives + (
                ~vote & (labels == 0)
            ).sum() / negatives
            # Ties: the cut nearest 0.5 (the unfitted default).
            if score > best + 1e-12 or (
                abs(score - best) <= 1e-12 and abs(cut - 0.5) < abs(best_cut - 0.5)
            ):
                best, best_cut = float(score), float(cut)
        out[column] = best_cut
    return out


def matching_metrics(labels: NDArray[np.int64], predicted: NDArray[np.int64]) -> dict[str, float]:
    """Accuracy, hallucination rate (FP / negatives), precision and F1 of "match"."""
    tp = int(((predicted == 1) & (labels == 1)).sum())
    fp = int(((predicted == 1) & (labels == 0)).sum())
    tn = int(((predicted == 0) & (labels == 0)).sum())
    fn = int(((predicted == 0) & (labels == 1)).sum())
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    return {
        "accuracy": (tp + tn) / max(len(labels), 1),
        "hallucination": fp / (fp + tn) if fp + tn else 0.0,
        "precision": precision,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
    }


def make_aggregators(
    seed: int, inputs: InputKind = "votes", **overrides: Any
) -> dict[str, Aggregator]:
    """One of each aggregator, seeded; ``overrides`` per name (``latent={"max_epochs": 50}``)."""
    out: dict[str, Aggregator] = {}
    for name, cls in AGGREGATORS.items():
        options: dict[str, Any] = dict(overrides.get(name, {}))
        if name != "majority":
            options.setdefault("inputs", inputs)
        if name in ("neural", "latent"):
            options.setdefault("seed", seed)
        out[name] = cls(**options)
    return out


def train_artifact(
    data: MatchingData,
    seed: int,
    *,
    inputs: InputKind = "votes",
    default_aggregator: str = "latent",
    embedder: str = "",
    dataset: str = "",
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    only: Sequence[str] | None = None,
) -> EnsembleArtifact:
    """Split with ``seed``, fit thresholds and aggregators, score validation and test."""
    split = split_data(data, seed)
    thresholds = fit_vote_thresholds(data.p_yes[split.train], data.labels[split.train])
    full = EnsembleInputs.from_p_yes(data.p_yes, data.embeddings, thresholds)
    train, validation, test = (full.take(i) for i in (split.train, split.validation, split.test))
    y_train, y_val, y_test = (data.labels[i] for i in (split.train, split.validation, split.test))
    aggregators = make_aggregators(
        seed, inputs, **{k: dict(v) for k, v in (overrides or {}).items()}
    )
    if only is not None:
        aggregators = {k: v for k, v in aggregators.items() if k in only}
    metrics: dict[str, Any] = {"aggregators": {}, "judges": {}}
    for name, aggregator in aggregators.items():
        aggregator.fit(train, y_train, (validation, y_val))
        metrics["aggregators"][name] = {
            "validation": matching_metrics(y_val, aggregator.predict(validation)),
            "test": matching_metrics(y_test, aggregator.predict(test)),
        }
    for column, judge in enumerate(data.judges):
        metrics["judges"][judge] = {
            "threshold": float(thresholds[column]),
            "test": matching_metrics(y_test, test.votes[:, column].astype(np.int64)),
            "test_at_0.5": matching_metrics(
                y_test, (test.p_yes[:, column] >= 0.5).astype(np.int64)
            ),
        }
    return EnsembleArtifact(
        judges=data.judges,
        vote_thresholds=thresholds,
        aggregators=aggregators,
        default_aggregator=default_aggregator
        if default_aggregator in aggregators
        else next(iter(aggregators)),
        embedder=embedder,
        dimension=int(data.embeddings.shape[1]),
        data={
            "dataset": dataset,
            "sha256": data.sha256,
            "items": len(data),
            "items_not_fully_judged": data.skipped,
            "split_seed": seed,
            "split_sizes": {
                "train": len(split.train),
                "validation": len(split.validation),
                "test": len(split.test),
            },
            "test_positives": int(y_test.sum()),
            "inputs": inputs,
        },
        metrics=metrics,
    )


def summarise(values: Sequence[float]) -> tuple[float, float]:
    """Mean and sample standard deviation (0 for one value)."""
    array = np.asarray(values, dtype=np.float64)
    return float(array.mean()), float(array.std(ddof=1)) if len(array) > 1 else 0.0


def ablation(
    data: MatchingData,
    seeds: Sequence[int],
    *,
    order_seed: int = 0,
    inputs: InputKind = "votes",
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """RAL2M Table 7: judges added one at a time in a seeded random order; latent vs majority
    for ensembles of 2..K judges, test metrics over ``seeds``."""
    order = list(data.judges)
    random.Random(order_seed).shuffle(order)
    rows = []
    for size in range(2, len(order) + 1):
        subset = data.with_judges(order[:size])
        per_seed = [
            train_artifact(
                subset, seed, inputs=inputs, overrides=overrides, only=("majority", "latent")
            )
            for seed in seeds
        ]
        row: dict[str, Any] = {"size": size, "judges": order[:size]}
        for name in ("latent", "majority"):
            for metric in ("accuracy", "hallucination"):
                values = [a.metrics["aggregators"][name]["test"][metric] for a in per_seed]
                row[f"{name}_{metric}"] = summarise(values)
        rows.append(row)
    return {"order": order, "rows": rows}
