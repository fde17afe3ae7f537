"""Labelling jobs side by side against their gold grades: ``tribunal label compare``.

For every job: items, how each was decided (judges, debate, human queue), balanced
accuracy and class recalls of the model labels on the non-escalated items with gold
(relevant = grade ≥ ``relevant_at``, the TREC DL convention for 2), with a 95%
percentile-bootstrap interval, escalation ratio and cost (tokens and model seconds per
item: the cost of computing each answer, also when a run reused cached answers).

Paired view, on the items one job sent to the debate: the debate's balanced accuracy
there beside another job's (the judge-only run's) on exactly those items — whether the
debate adds anything over the judge where the judge is unsure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..core import InvalidArgumentError
from ..core.metrics import balanced_accuracy, bootstrap_ci
from ._store import JobItem, JobStore

__all__ = ["JobComparison", "compare_jobs", "comparison_markdown"]


@dataclass(frozen=True)
class JobComparison:
    """The figures of one job (see the module docstring)."""

    job: str
    mode: str
    items: int
    finished: int
    with_gold: int
    by_source: dict[str, int]
    escalated: float
    debated: float
    kept: int
    balanced_accuracy: dict[str, float] | None
    recall_relevant: float | None
    recall_irrelevant: float | None
    tokens_per_item: float
    model_seconds_per_item: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _bacc_ci(y: np.ndarray, predicted: np.ndarray, seed: int) -> dict[str, float] | None:
    if y.size == 0 or len(set(y.tolist())) < 2:
        return None
    ci = bootstrap_ci(
        lambda t, p: balanced_accuracy(t, p.astype(np.int64)),
        y,
        predicted.astype(np.float64),
        n_resamples=1000,
        seed=seed,
    )
    return {"value": ci.value, "low": ci.low, "high": ci.high}


def _recall(y: np.ndarray, predicted: np.ndarray, value: int) -> float | None:
    mask = y == value
    return float((predicted[mask] == value).mean()) if mask.any() else None


def _one(
    store: JobStore, name: str, relevant_at: int, seed: int, only: frozenset[str] | None
) -> JobComparison:
    entries = [e for e in store.items(name) if only is None or e.item.item_id in only]
    done = [e for e in entries if e.result is not None]
    by_source: dict[str, int] = {}
    for entry in done:
        assert entry.result is not None
        by_source[entry.result.source] = by_source.get(entry.result.source, 0) + 1
    kept = [e for e in done if e.result is not None and e.result.label is not None]
    graded = [e for e in kept if e.item.gold is not None]
    y = np.array([int(e.item.gold >= relevant_at) for e in graded if e.item.gold is not None])
    predicted = np.array([e.result.label for e in graded if e.result is not None])
    n = max(len(done), 1)
    return JobComparison(
        job=name,
        mode=store.job(name).mode,
        items=len(entries),
        finished=len(done),
        with_gold=sum(e.item.gold is not None for e in done),
        by_source=dict(sorted(by_source.items())),
        escalated=by_source.get("HUMAN_QUEUE", 0) / n,
        debated=sum(1 for e in done if e.result is not None and e.result.outcome) / n,
        kept=len(graded),
        balanced_accuracy=_bacc_ci(y, predicted, seed),
        recall_relevant=_recall(y, predicted, 1),
        recall_irrelevant=_recall(y, predicted, 0),
        tokens_per_item=sum(e.result.tokens for e in done if e.result is not None) / n,
        model_seconds_per_item=sum(e.result.seconds for e in done if e.result is not None) / n,
    )


def _paired(
    store: JobStore,
    debated_in: str,
    other: str,
    *,
    relevant_at: int,
    seed: int,
    only: frozenset[str] | None,
) -> dict[str, Any] | None:
    """The debate's labels on ``debated_in``'s debated items vs ``other``'s labels there."""

    def labelled(name: str) -> dict[str, JobItem]:
        return {
            e.item.item_id: e
            for e in store.items(name, finished=True)
            if only is None or e.item.item_id in only
        }

    mine, theirs = labelled(debated_in), labelled(other)
    ids = [
        i
        for i, e in mine.items()
        if e.result is not None
        and e.result.source == "DEBATE"
        and e.item.gold is not None
        and i in theirs
        and theirs[i].result is not None
        and theirs[i].result.label is not None  # type: ignore[union-attr]
    ]
    if not ids:
        return None
    y = np.array([int(mine[i].item.gold >= relevant_at) for i in ids])  # type: ignore[operator]
    debate = np.array([mine[i].result.label for i in ids])  # type: ignore[union-attr]
    judge = np.array([theirs[i].result.label for i in ids])  # type: ignore[union-attr]
    return {
        "debated_in": debated_in,
        "other": other,
        "items": len(ids),
        "positives": int(y.sum()),
        "debate_balanced_accuracy": _bacc_ci(y, debate, seed),
        "other_balanced_accuracy": _bacc_ci(y, judge, seed),
        "agreement": float((debate == judge).mean()),
    }


def compare_jobs(
    store: JobStore,
    names: Sequence[str],
    *,
    relevant_at: int = 2,
    seed: int = 13,
    only: Iterable[str] | None = None,
) -> dict[str, Any]:
    """Every job's figures and, for each job that debated some items, the paired view
    against every judge-mode job of the list; ``only``: just these item ids (e.g. the
    test split of the data a judge's threshold was chosen on).

    Raises:
        InvalidArgumentError: an unknown job name.
    """
    known = {job.name for job in store.jobs()}
    for name in names:
        if name not in known:
            raise InvalidArgumentError(
                f"no job named {name!r}; jobs in this store: {', '.join(sorted(known)) or 'none'}",
                field="jobs",
            )
    subset = None if only is None else frozenset(only)
    rows = [_one(store, name, relevant_at, seed, subset) for name in names]
    judges = [r.job for r in rows if r.mode == "judge"]
    paired = [
        one
        for row in rows
        if row.mode == "cascade"
        for other in judges
        if (one := _paired(store, row.job, other, relevant_at=relevant_at, seed=seed, only=subset))
        is not None
    ]
    return {
        "relevant_at": relevant_at,
        "only": None if subset is None else len(subset),
        "jobs": [r.to_json() for r in rows],
        "paired": paired,
    }


def _ci(value: dict[str, float] | None) -> str:
    if not value:
        return "–"
    return f"{value['value']:.3f} [{value['low']:.3f}, {value['high']:.3f}]"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def comparison_markdown(report: dict[str, Any]) -> str:
    """The comparison as markdown tables."""
    lines = [
        f"Gold: relevant = grade ≥ {report['relevant_at']}; balanced accuracy on the "
        "non-escalated items with gold, 95% bootstrap interval"
        + (f"; only the {report['only']} listed item ids." if report.get("only") else "."),
        "",
        "| job | mode | items | by source | escalated | debated | bAcc [95% CI] | "
        "recall relevant | recall irrelevant | tokens/item | model s/item |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["jobs"]:
        sources = ", ".join(f"{k.lower()} {v}" for k, v in row["by_source"].items())
        lines.append(
            f"| {row['job']} | {row['mode']} | {row['finished']}/{row['items']} | {sources} | "
            f"{_share(row['escalated'])} | {_share(row['debated'])} | "
            f"{_ci(row['balanced_accuracy'])} | {_share(row['recall_relevant'])} | "
            f"{_share(row['recall_irrelevant'])} | {row['tokens_per_item']:.0f} | "
            f"{row['model_seconds_per_item']:.2f} |"
        )
    for one in report["paired"]:
        lines += [
            "",
            f"On the {one['items']} items {one['debated_in']} sent to the debate "
            f"({one['positives']} relevant): debate bAcc {_ci(one['debate_balanced_accuracy'])}"
            f" vs {one['other']} {_ci(one['other_balanced_accuracy'])}; the two agree on "
            f"{one['agreement']:.1%}.",
        ]
    return "\n".join(lines) + "\n"
