"""An evaluation as a label job: the pool's holes are the job's items, the human sample
is queued for review through the job's items.

The judge labels the holes like any label job (leases, resume, progress, audit rows);
once every hole has its judge label the human sample is drawn — a pure function of the
job's recorded design, budget and seed and of the judge's labels, so every re-run (any
machine) finds the same sample — and each drawn hole is queued for review (an escalation
whose history records its stratum and inclusion probability). Human labels come back
through ``tribunal review`` and ``tribunal label aggregate --job``; :func:`pool_labels`
reads whatever has arrived.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..core import FailedPreconditionError, InvalidArgumentError
from ..core.storage import EscalationRecord
from ._items import LabelItem, unknown_ids
from ._ppi import HumanSample, PoolLabels
from ._ppi_pool import MetricSpec, RunPool
from ._ppi_sample import Design, draw_sample
from ._store import JobStore

__all__ = ["SAMPLE_REASON", "evaluation_items", "pair_id", "pool_labels", "queue_sample"]

SAMPLE_REASON = "evaluation-sample"
"""The escalation reason of a hole drawn into an evaluation's human sample."""


def pair_id(qid: str, docid: str) -> str:
    return f"{qid}:{docid}"


def evaluation_items(
    pool: RunPool,
    known: Mapping[tuple[str, str], int],
    topics: Mapping[str, str],
    corpus: Mapping[str, str],
) -> list[LabelItem]:
    """The holes of the pool (pairs without a qrels line) as label items, pool order."""
    holes = [pair for pair in pool.pairs if pair not in known]
    missing_q, missing_d = unknown_ids(holes, topics, corpus)
    if missing_q or missing_d:
        raise InvalidArgumentError(
            f"the runs name {len(missing_q)} query id(s) missing from --topics {missing_q[:5]} "
            f"and {len(missing_d)} document id(s) missing from --corpus {missing_d[:5]}"
        )
    return [
        LabelItem(
            item_id=pair_id(qid, docid),
            query=topics[qid],
            chunk=corpus[docid],
            query_id=qid,
            doc_id=docid,
        )
        for qid, docid in holes
    ]


def pool_labels(
    store: JobStore,
    job: str,
    pool: RunPool,
    known: Mapping[tuple[str, str], int],
    *,
    levels: int,
    relevant_at: int,
) -> PoolLabels:
    """Known grades, the judge's P and label, and the human grades that have arrived (a
    human "relevant" counts as grade ``relevant_at``)."""
    index = {pair_id(qid, docid): i for i, (qid, docid) in enumerate(pool.pairs)}
    size = pool.size
    known_grades = np.array([known.get(pair, -1) for pair in pool.pairs], dtype=np.int64)
    judge_p = np.full(size, np.nan)
    judge_label = np.zeros(size, dtype=np.int64)
    human = np.full(size, -1, dtype=np.int64)
    labelled = np.zeros(size, dtype=bool)
    for entry in store.items(job):
        i = index.get(entry.item.item_id)
        if i is None or known_grades[i] >= 0:
            continue
        result = entry.result
        if result is None:
            continue
        labelled[i] = True
        if result.label is not None and result.p_relevant is not None:
            judge_p[i] = result.p_relevant
            judge_label[i] = result.label
        # else: the judge refused the pair (FAILED, its reason in the job's outputs): no
        # judge label; the estimator predicts it from the runs' ranks and the sample.
        if entry.human_label is not None:
            human[i] = entry.human_label * relevant_at
    holes = known_grades < 0
    missing = int(np.sum(holes & ~labelled))
    if missing:
        raise FailedPreconditionError(
            f"job {job!r}: {missing} pooled pair(s) are not labelled yet; run the command "
            "again to label them"
        )
    return PoolLabels(
        known=known_grades,
        judge_p=judge_p,
        judge_label=judge_label,
        human=human,
        query_of=pool.query_of,
        levels=levels,
        relevant_at=relevant_at,
    )


def queue_sample(
    store: JobStore,
    job: str,
    pool: RunPool,
    labels: PoolLabels,
    *,
    budget: int,
    design: Design,
    seed: int,
    metrics: Sequence[MetricSpec],
) -> HumanSample:
    """Draw the job's human sample (the same on every call) and queue each drawn hole for
    review once, in the sample's random order; returns the sample."""
    try:
        sample, order = draw_sample(pool, labels, budget, design=design, seed=seed, metrics=metrics)
    except ValueError as exc:
        raise InvalidArgumentError(f"job {job!r}: {exc}", field="budget") from None

    inclusion = sample.inclusion()
    sizes = sample.sizes
    queued = {
        entry.item.item_id
        for entry in store.items(job)
        if entry.result is not None and entry.result.escalation_id
    }
    items = {entry.item.item_id: entry.item for entry in store.items(job)}
    for position, i in enumerate(order):
        qid, docid = pool.pairs[int(i)]
        item_id = pair_id(qid, docid)
        if item_id in queued:
            continue
        item = items[item_id]
        stratum = int(sample.stratum[i])
        history: dict[str, Any] = {
            "evaluation": {
                "design": design,
                "seed": seed,
                "budget": budget,
                "stratum": stratum,
                "stratum_size": int(sizes[stratum]),
                "inclusion_probability": round(float(inclusion[i]), 8),
                "review_position": position,
                "judge_p_relevant": round(float(labels.judge_p[i]), 6),
            }
        }
        escalation = store.db.add_escalation(
            EscalationRecord(
                query=item.query,
                chunk=item.chunk,
                reason=SAMPLE_REASON,
                answers=item.answers,
                item_id=item_id,
                history=history,
            )
        )
        store.set_escalation(job, item_id, escalation)
    return sample
