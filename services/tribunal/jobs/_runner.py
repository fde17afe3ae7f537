"""The local job runner: a thread pool labels pending items, the driver writes results.

Items come from the store (pending = no result yet, in input order, a page at a time),
go to the labeller in batches on ``workers`` threads, and each finished batch is written
by the driver thread as soon as it arrives: a job killed at any point loses at most the
batches in flight, which a resume labels again (the guarded write keeps the first result
of an item, so nothing is labelled twice). A tqdm bar shows rate and ETA, with the
escalation ratio and tokens so far; the report at the end is the job's cost.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from tqdm import tqdm

from ._inputs import LabelItem
from ._labeller import Labeller
from ._store import ItemResult, JobStore

__all__ = ["JobProgress", "RunReport", "batched", "run_job"]


@dataclass
class RunReport:
    """What one run of a job did and cost."""

    job: str
    mode: str
    runner: str
    workers: int
    labelled: int = 0
    """Results written in this run."""
    already_done: int = 0
    """Results discarded because the item was finished meanwhile (another runner)."""
    tokens: int = 0
    model_seconds: float = 0.0
    """Sum of per-item labelling time (over all workers)."""
    wall_seconds: float = 0.0
    load_seconds: float = 0.0
    """Model loading before the first item (not in ``wall_seconds``)."""
    sources: Counter[str] = field(default_factory=Counter)
    remaining: int = 0
    """Items still pending after the run (0 when the job is done)."""

    @property
    def escalated(self) -> int:
        return self.sources["HUMAN_QUEUE"]

    @property
    def items_per_s(self) -> float:
        return self.labelled / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "mode": self.mode,
            "runner": self.runner,
            "workers": self.workers,
            "labelled": self.labelled,
            "already_done": self.already_done,
            "remaining": self.remaining,
            "sources": dict(self.sources),
            "escalation_ratio": round(self.escalated / self.labelled, 4) if self.labelled else 0,
            "tokens": self.tokens,
            "tokens_per_item": round(self.tokens / self.labelled, 1) if self.labelled else 0,
            "wall_seconds": round(self.wall_seconds, 2),
            "load_seconds": round(self.load_seconds, 2),
            "model_seconds": round(self.model_seconds, 2),
            "items_per_s": round(self.items_per_s, 4),
        }

    def text(self) -> str:
        data = self.to_json()
        by_source = ", ".join(f"{k.lower()} {v}" for k, v in sorted(self.sources.items()))
        return (
            f"job {self.job} ({self.mode}, {self.runner}, {self.workers} worker(s)): "
            f"{self.labelled} item(s) labelled in {self.wall_seconds:.1f} s "
            f"({data['items_per_s']} items/s; models loaded in {self.load_seconds:.1f} s)\n"
            f"  by: {by_source or '-'}; escalation ratio {data['escalation_ratio']}\n"
            f"  tokens: {self.tokens} ({data['tokens_per_item']} per item); "
            f"model time {self.model_seconds:.1f} s; {self.remaining} item(s) still pending"
        )


def batched(items: Iterable[LabelItem], size: int) -> Iterator[list[LabelItem]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, size)):
        yield batch


class JobProgress:
    """Writes arriving results to the store and keeps the bar and the report current."""

    def __init__(self, store: JobStore, report: RunReport, *, total: int, show: bool) -> None:
        self.store = store
        self.report = report
        self.bar = tqdm(total=total, desc=report.job, unit="item", disable=not show)

    def add(self, results: Sequence[ItemResult]) -> None:
        written = self.store.record(self.report.job, results)
        report = self.report
        report.labelled += written
        report.already_done += len(results) - written
        for result in results:
            report.sources[result.source] += 1
            report.tokens += result.tokens
            report.model_seconds += result.seconds
        done = report.labelled + report.already_done
        self.bar.set_postfix(
            escalated=f"{report.escalated / done:.1%}" if done else "-",
            tokens=report.tokens,
            refresh=False,
        )
        self.bar.update(len(results))

    def close(self) -> None:
        self.bar.close()


def run_job(
    store: JobStore,
    job: str,
    labeller: Labeller,
    *,
    mode: str,
    workers: int = 1,
    batch_size: int = 4,
    progress: bool = True,
    load_seconds: float = 0.0,
) -> RunReport:
    """Label every pending item of ``job``; returns the run's report.

    On an error (a store write failed, a labeller raised) the run stops, the job is
    marked ``stopped`` and the error propagates; results already written stay.
    """
    if workers < 1 or batch_size < 1:
        raise ValueError("workers and batch_size must be >= 1")
    report = RunReport(
        job=job, mode=mode, runner="local", workers=workers, load_seconds=load_seconds
    )
    tracker = JobProgress(store, report, total=store.counts(job).pending, show=progress)
    store.set_status(job, "running")
    batches = batched((entry.item for entry in store.items(job, finished=False)), batch_size)
    started = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="label-worker")
    in_flight: set[Future[list[ItemResult]]] = set()
    finished_ok = False
    try:
        # Two batches per worker in flight: workers never wait on the driver, and the
        # pending items are read from the store as they are needed, not all at once.
        for batch in itertools.islice(batches, 2 * workers):
            in_flight.add(pool.submit(labeller.label, batch))
        while in_flight:
            done, in_flight = wait(in_flight, return_when=FIRST_COMPLETED)
            failed = [future for future in done if future.exception() is not None]
            # Write every batch that succeeded before raising a failure: its items
            # were labelled, and a resume should not label them again.
            for future in done:
                if future not in failed:
                    tracker.add(future.result())
            if failed:
                raise failed[0].exception()  # type: ignore[misc]
            for _ in done:
                following = next(batches, None)
                if following:
                    in_flight.add(pool.submit(labeller.label, following))
        finished_ok = True
    finally:
        pool.shutdown(wait=not finished_ok, cancel_futures=True)
        report.wall_seconds = time.perf_counter() - started
        tracker.close()
        report.remaining = store.counts(job).pending
        store.set_status(job, "done" if finished_ok and report.remaining == 0 else "stopped")
    return report
