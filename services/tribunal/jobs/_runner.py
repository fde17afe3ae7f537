"""The local job runner: a thread pool labels pending items, the driver writes results.

The driver claims pending items from the store a batch at a time under a lease (see
:class:`JobStore`), so several runners on one job — threads, processes or machines —
label disjoint items; it renews the leases of the batches in flight while they run.
Batches go to the labeller on ``workers`` threads, and each finished batch is written
by the driver thread as soon as it arrives: a job killed at any point loses at most the
batches in flight, which a resume labels again (the guarded write keeps the first result
of an item, so nothing is labelled twice). An item the pipeline refuses is recorded as
``FAILED`` with the reason and the job goes on. A tqdm bar shows rate and ETA, with the
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

from ._items import LabelItem
from ._labeller import Labeller, PartialBatchError
from ._store import ItemResult, JobStore, runner_id

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
    claimed: int = 0
    """Items this run leased (each sent to the labeller once)."""
    held_by_others: int = 0
    """Of ``remaining``, items other runners were labelling when this run ended."""

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
            "claimed": self.claimed,
            "held_by_others": self.held_by_others,
            "failed": self.sources["FAILED"],
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
            + (
                f" ({self.held_by_others} being labelled by other runners)"
                if self.held_by_others
                else ""
            )
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


class _LeasedBatches:
    """Batches claimed under this runner's lease and handed to the labeller's threads."""

    def __init__(
        self,
        store: JobStore,
        job: str,
        labeller: Labeller,
        report: RunReport,
        *,
        workers: int,
        batch_size: int,
        lease_s: float,
    ) -> None:
        self.store, self.job, self.labeller, self.report = store, job, labeller, report
        self.batch_size, self.lease_s = batch_size, lease_s
        self.owner = runner_id()
        self.pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="label-worker")
        self.in_flight: dict[Future[list[ItemResult]], list[str]] = {}

    def submit_next(self) -> bool:
        batch = self.store.claim(self.job, self.owner, self.batch_size, lease_s=self.lease_s)
        if not batch:
            return False
        self.report.claimed += len(batch)
        future = self.pool.submit(self.labeller.label, batch)
        self.in_flight[future] = [item.item_id for item in batch]
        return True

    def wait_some(self) -> set[Future[list[ItemResult]]]:
        """Finished batches; renews the leases of the running ones while none finishes."""
        while True:
            done, _ = wait(self.in_flight, timeout=self.lease_s / 3, return_when=FIRST_COMPLETED)
            if done:
                for future in done:
                    self.in_flight.pop(future)
                return done
            running = [item_id for ids in self.in_flight.values() for item_id in ids]
            self.store.renew(self.job, self.owner, running, lease_s=self.lease_s)

    def close(self, *, finished_ok: bool) -> None:
        """Stop the threads, give back the leases, record the job's status."""
        self.pool.shutdown(wait=not finished_ok, cancel_futures=True)
        self.store.release(self.job, self.owner)
        self.report.remaining = self.store.counts(self.job).pending
        if self.report.remaining:
            self.report.held_by_others = self.store.leased(self.job, exclude_owner=self.owner)
        record_closing_status(self.store, self.job, self.report, finished_ok=finished_ok)


def record_closing_status(
    store: JobStore, job: str, report: RunReport, *, finished_ok: bool
) -> None:
    """The job's status as a run ends: ``done`` when nothing is pending, ``stopped`` when
    this run failed or left items nobody holds. When what is left is other runners' to
    finish, the status stays as it is (``running``): writing ``running`` here could land
    after the last runner's ``done`` and leave a finished job marked running."""
    if report.remaining == 0:
        store.set_status(job, "done")
    elif not finished_ok or report.remaining != report.held_by_others:
        store.set_status(job, "stopped")


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
    lease_s: float = 300.0,
) -> RunReport:
    """Label every pending item of ``job`` this run can claim; returns the run's report.

    Items are claimed under a lease of ``lease_s`` seconds, renewed every third of it
    while their batch runs. On an error that may pass (a store write failed, a stage is
    down) the run stops, the job is marked ``stopped``, its leases are given back and
    the error propagates; results already written stay.
    """
    if workers < 1 or batch_size < 1 or lease_s <= 0:
        raise ValueError("workers and batch_size must be >= 1, lease_s > 0")
    report = RunReport(
        job=job, mode=mode, runner="local", workers=workers, load_seconds=load_seconds
    )
    tracker = JobProgress(store, report, total=store.counts(job).pending, show=progress)
    store.set_status(job, "running")
    started = time.perf_counter()
    batches = _LeasedBatches(
        store, job, labeller, report, workers=workers, batch_size=batch_size, lease_s=lease_s
    )
    finished_ok = False
    try:
        # Two batches per worker in flight: workers never wait on the driver, and the
        # pending items are claimed as they are needed, not all at once.
        for _ in range(2 * workers):
            if not batches.submit_next():
                break
        while batches.in_flight:
            done = batches.wait_some()
            failure: BaseException | None = None
            # Write every batch that succeeded before raising a failure: its items
            # were labelled, and a resume should not label them again.
            for future in done:
                error = future.exception()
                if error is None:
                    tracker.add(future.result())
                elif isinstance(error, PartialBatchError):
                    tracker.add(error.results)
                failure = failure or error
            if failure is not None:
                raise failure
            for _ in done:
                batches.submit_next()
        finished_ok = True
    finally:
        report.wall_seconds = time.perf_counter() - started
        tracker.close()
        batches.close(finished_ok=finished_ok)
    return report
