"""What a job hands over: labels JSONL, TREC qrels (holes apart), the escalation queue.

The final label of an item is the humans' when they labelled it (``tribunal label
aggregate``), else the model's; escalated items without a human label have none and
appear only in the escalation queue.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.storage import EscalationRow
from ._store import JobItem, JobStore

__all__ = ["ExportCounts", "export_job", "final_label", "qrels_ids"]


@dataclass(frozen=True)
class ExportCounts:
    labels: int
    """Finished items in the labels JSONL."""
    qrels: int
    """Pairs with a final label in the qrels."""
    holes: int
    """Of those, pairs the input's qrels had not judged."""
    escalations: int
    """Items waiting for humans."""
    pending: int
    """Items not labelled yet (the job is not finished)."""

    def to_json(self) -> dict[str, int]:
        return dict(self.__dict__)


def final_label(entry: JobItem) -> int | None:
    """The humans' label when there is one, else the model's (None: nobody decided)."""
    if entry.human_label is not None:
        return entry.human_label
    return entry.result.label if entry.result is not None else None


def qrels_ids(entry: JobItem) -> tuple[str, str]:
    """(qid, docid) of an item: the input's, or stable stand-ins (a hash of the query,
    the item id) for inputs that carry no ids."""
    item = entry.item
    qid = item.query_id or "q" + hashlib.sha256(item.query.encode()).hexdigest()[:12]
    return qid, item.doc_id or item.item_id


def _label_row(entry: JobItem) -> dict[str, Any]:
    item, result = entry.item, entry.result
    assert result is not None
    return {
        "item_id": item.item_id,
        "query_id": item.query_id,
        "doc_id": item.doc_id,
        "query": item.query,
        "label": final_label(entry),
        "model_label": result.label,
        "source": result.source,
        "p_relevant": result.p_relevant,
        "debate_outcome": result.outcome or None,
        "human_label": entry.human_label,
        "human_method": entry.human_method,
        "gold": item.gold,
        "hole": item.gold is None,
        "tokens": result.tokens,
        "seconds": round(result.seconds, 4),
        "escalation_id": result.escalation_id or None,
        "audit_id": result.audit_id or None,
        "error": result.error or None,
        "finished_at": entry.finished_at.isoformat() if entry.finished_at else None,
    }


def export_job(
    store: JobStore,
    job: str,
    *,
    labels: Path | None = None,
    qrels: Path | None = None,
    holes: Path | None = None,
    escalations: Path | None = None,
) -> ExportCounts:
    """Write the outputs that are asked for; returns what each holds.

    ``qrels`` lists every labelled pair as ``qid 0 docid label`` (1 relevant, 0 not);
    ``holes`` the same lines for the pairs the input's qrels did not judge, so they can
    be merged into the benchmark's qrels; ``escalations`` one JSON object per item
    waiting for humans, with the debate history the reviewers need.
    """
    handles = {
        name: _open(path)
        for name, path in (
            ("labels", labels),
            ("qrels", qrels),
            ("holes", holes),
            ("escalations", escalations),
        )
        if path is not None
    }
    counts = dict.fromkeys(("labels", "qrels", "holes", "escalations", "pending"), 0)
    try:
        for entry in store.items(job):
            if entry.result is None:
                counts["pending"] += 1
                continue
            counts["labels"] += 1
            if "labels" in handles:
                handles["labels"].write(json.dumps(_label_row(entry)) + "\n")
            label = final_label(entry)
            if label is not None:
                qid, docid = qrels_ids(entry)
                line = f"{qid} 0 {docid} {label}\n"
                counts["qrels"] += 1
                if "qrels" in handles:
                    handles["qrels"].write(line)
                if entry.item.gold is None:
                    counts["holes"] += 1
                    if "holes" in handles:
                        handles["holes"].write(line)
            elif entry.result.source == "HUMAN_QUEUE":
                counts["escalations"] += 1
                if "escalations" in handles:
                    handles["escalations"].write(json.dumps(_escalation_row(store, entry)) + "\n")
    finally:
        for handle in handles.values():
            handle.close()
    return ExportCounts(**counts)


def _open(path: Path) -> Any:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.open("w", encoding="utf-8")


def _escalation_row(store: JobStore, entry: JobItem) -> dict[str, Any]:
    item, result = entry.item, entry.result
    assert result is not None
    history: dict[str, Any] = {}
    reason = ""
    if result.escalation_id:
        with store.db.session() as session:
            row = session.get(EscalationRow, result.escalation_id)
            if row is not None:
                history, reason = dict(row.history or {}), row.reason
    return {
        "item_id": item.item_id,
        "query_id": item.query_id,
        "doc_id": item.doc_id,
        "query": item.query,
        "chunk": item.chunk,
        "answers": list(item.answers),
        "reason": reason,
        "p_relevant": result.p_relevant,
        "debate_outcome": result.outcome or None,
        "escalation_id": result.escalation_id or None,
        "audit_id": result.audit_id or None,
        "history": history,
    }
