"""The job store on SQLite and a real PostgreSQL: idempotent items, results written once."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from tribunal.core import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)
from tribunal.core.storage import Database, EscalationRecord
from tribunal.jobs import JobStore, LabelItem, export_job, run_job
from tribunal.jobs._store import ItemResult

ITEMS = [
    LabelItem(
        item_id=f"q{i // 2}:d{i}",
        query=f"query {i // 2}",
        chunk=f"chunk {i}",
        answers=("a",) if i % 2 else (),
        query_id=f"q{i // 2}",
        doc_id=f"d{i}",
        gold=1 if i < 2 else None,
    )
    for i in range(5)
]


def _store(url: str) -> JobStore:
    store = JobStore(Database(url))
    store.create_job(
        "dl19",
        mode="judge",
        settings={"judges": ["llm_tiny/ral2m"]},
        source={"path": "x.jsonl", "format": "jsonl"},
    )
    return store


def test_jobs_are_created_once_and_resumed_by_name(database_url: str) -> None:
    store = _store(database_url)
    job = store.job("dl19")
    assert (job.mode, job.status, job.settings, job.source["format"]) == (
        "judge",
        "created",
        {"judges": ["llm_tiny/ral2m"]},
        "jsonl",
    )
    with pytest.raises(FailedPreconditionError, match="--resume"):
        store.create_job("dl19", mode="judge", settings={}, source={})
    assert store.create_job("dl19", mode="judge", settings={}, source={}, resume=True) == job
    with pytest.raises(InvalidArgumentError, match="--mode judge"):
        store.create_job("dl19", mode="cascade", settings={}, source={}, resume=True)
    with pytest.raises(NotFoundError):
        store.create_job("other", mode="judge", settings={}, source={}, resume=True)
    with pytest.raises(InvalidArgumentError, match="job name"):
        store.create_job("bad name!", mode="judge", settings={}, source={})
    assert [j.name for j in store.jobs()] == ["dl19"]
    store.close()


def test_items_are_added_once_and_results_written_once(database_url: str) -> None:
    store = _store(database_url)
    assert store.add_items("dl19", ITEMS[:3]) == 3
    assert store.add_items("dl19", ITEMS) == 2  # the first three are already there
    assert store.add_items("dl19", ITEMS) == 0
    assert [i.item_id for i in store.pending("dl19")] == [i.item_id for i in ITEMS]
    assert store.pending("dl19")[1] == ITEMS[1]

    first = ItemResult(
        "q0:d0", 1, "JUDGES", p_relevant=0.9, tokens=120, seconds=0.5, audit_id="a" * 32
    )
    assert store.record("dl19", [first]) == 1
    # A second result for the same item (a re-run after a crash) changes nothing.
    assert store.record("dl19", [ItemResult("q0:d0", 0, "JUDGES", p_relevant=0.1)]) == 0
    assert (
        store.record(
            "dl19",
            [
                ItemResult(
                    "q0:d1",
                    None,
                    "HUMAN_QUEUE",
                    outcome="ESCALATED",
                    tokens=300,
                    seconds=2.0,
                    escalation_id="e" * 32,
                ),
                ItemResult("q1:d2", 0, "DEBATE", outcome="AGREED", tokens=200, seconds=1.5),
            ],
        )
        == 2
    )
    counts = store.counts("dl19")
    assert counts.to_json() == {
        "total": 5,
        "finished": 3,
        "pending": 2,
        "relevant": 1,
        "irrelevant": 1,
        "escalated": 1,
        "failed": 0,
        "human_labelled": 0,
        "tokens": 620,
        "seconds": 4.0,
    }
    assert [i.item_id for i in store.pending("dl19")] == ["q1:d3", "q2:d4"]
    assert [i.item_id for i in store.pending("dl19", limit=1)] == ["q1:d3"]
    stored = next(store.items("dl19", finished=True))
    assert stored.result == first
    assert stored.item == ITEMS[0]

    store.set_human_label("dl19", "q0:d1", 1, "dawid-skene")
    assert store.counts("dl19").human_labelled == 1
    with pytest.raises(NotFoundError):
        store.set_human_label("dl19", "nope", 1, "majority")
    with pytest.raises(InvalidArgumentError):
        store.set_human_label("dl19", "q0:d1", 3, "majority")
    with pytest.raises(InvalidArgumentError):
        store.record("dl19", [ItemResult("q1:d3", 1, "GUESS")])
    store.close()


def test_concurrent_writers_label_each_item_once(database_url: str) -> None:
    store = _store(database_url)
    store.add_items("dl19", ITEMS)
    written: list[int] = []

    def writer(label: int) -> None:
        own = JobStore(Database(database_url))
        written.append(own.record("dl19", [ItemResult(i.item_id, label, "JUDGES") for i in ITEMS]))
        own.close()

    threads = [threading.Thread(target=writer, args=(n % 2,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(written) == len(ITEMS)
    counts = store.counts("dl19")
    assert (counts.total, counts.finished, counts.pending) == (5, 5, 0)
    store.close()


def test_export_writes_labels_qrels_holes_and_the_queue(database_url: str, tmp_path: Path) -> None:
    store = _store(database_url)
    store.add_items("dl19", ITEMS)
    escalation = store.db.add_escalation(
        EscalationRecord(
            query=ITEMS[3].query,
            chunk=ITEMS[3].chunk,
            reason="escalated",
            item_id=ITEMS[3].item_id,
            history={"rounds": [{"a": "relevant"}]},
        )
    )
    store.record(
        "dl19",
        [
            ItemResult("q0:d0", 1, "JUDGES", p_relevant=0.9),
            ItemResult("q0:d1", 0, "JUDGES", p_relevant=0.2),
            ItemResult("q1:d2", 1, "DEBATE", outcome="AGREED"),
            ItemResult("q1:d3", None, "HUMAN_QUEUE", outcome="ESCALATED", escalation_id=escalation),
        ],
    )
    paths = {name: tmp_path / f"{name}.out" for name in ("labels", "qrels", "holes", "escalations")}
    counts = export_job(store, "dl19", **paths)
    assert counts.to_json() == {"labels": 4, "qrels": 3, "holes": 1, "escalations": 1, "pending": 1}
    assert paths["qrels"].read_text() == "q0 0 d0 1\nq0 0 d1 0\nq1 0 d2 1\n"
    assert paths["holes"].read_text() == "q1 0 d2 1\n"
    import json

    labels = [json.loads(line) for line in paths["labels"].read_text().splitlines()]
    assert [(r["item_id"], r["label"], r["source"], r["hole"]) for r in labels] == [
        ("q0:d0", 1, "JUDGES", False),
        ("q0:d1", 0, "JUDGES", False),
        ("q1:d2", 1, "DEBATE", True),
        ("q1:d3", None, "HUMAN_QUEUE", True),
    ]
    [queued] = [json.loads(line) for line in paths["escalations"].read_text().splitlines()]
    assert queued["item_id"] == "q1:d3"
    assert queued["escalation_id"] == escalation
    assert queued["history"] == {"rounds": [{"a": "relevant"}]}
    # A human label makes the escalated item a qrels line (a hole, filled by people).
    store.set_human_label("dl19", "q1:d3", 0, "majority")
    counts = export_job(store, "dl19", **paths)
    assert (counts.qrels, counts.holes, counts.escalations) == (4, 2, 0)
    assert paths["holes"].read_text() == "q1 0 d2 1\nq1 0 d3 0\n"
    store.close()


class _Failing:
    """Labels two batches, then fails like a store outage would."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def label(self, items: list[LabelItem]) -> list[ItemResult]:
        with self.lock:
            self.calls += 1
            call = self.calls
        if call > 2:
            raise UnavailableError("the audit store went away")
        return [ItemResult(i.item_id, 1, "JUDGES", tokens=10) for i in items]

    def close(self) -> None:
        return None


def test_a_failing_run_stops_and_keeps_what_it_wrote(database_url: str) -> None:
    store = _store(database_url)
    store.add_items("dl19", ITEMS)
    with pytest.raises(UnavailableError, match="went away"):
        run_job(store, "dl19", _Failing(), mode="judge", workers=1, batch_size=2, progress=False)
    counts = store.counts("dl19")
    assert (counts.finished, counts.pending, counts.tokens) == (4, 1, 40)
    assert store.job("dl19").status == "stopped"
    report = run_job(
        store, "dl19", _Failing(), mode="judge", workers=1, batch_size=2, progress=False
    )
    assert (report.labelled, report.remaining) == (1, 0)
    assert store.job("dl19").status == "done"
    store.close()
