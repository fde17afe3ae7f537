"""Label jobs: leases split the work between runners; refused items fail, the job goes on.

On SQLite and on a real PostgreSQL. The labellers here are small test doubles (the
runner's logic is under test); ``test_jobs_two_runners.py`` runs two real CLI runners
with a real model on one job.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest
from tribunal.core.storage import Database
from tribunal.jobs import ItemLimits, JobStore, LabelItem, check_items, run_job
from tribunal.jobs._labeller import failed_result
from tribunal.jobs._store import ItemResult, runner_id

ITEMS = [LabelItem(f"i{n}", f"query {n}", f"passage {n}") for n in range(12)]


def _store(url: str) -> JobStore:
    store = JobStore(Database(url))
    store.create_job("j", mode="judge", settings={}, source={})
    store.add_items("j", ITEMS)
    return store


def test_two_owners_claim_disjoint_items_in_input_order(database_url: str) -> None:
    store = _store(database_url)
    first = store.claim("j", "runner-a", 5, lease_s=60)
    second = store.claim("j", "runner-b", 5, lease_s=60)
    third = store.claim("j", "runner-a", 5, lease_s=60)
    assert [i.item_id for i in first] == [f"i{n}" for n in range(5)]
    assert [i.item_id for i in second] == [f"i{n}" for n in range(5, 10)]
    assert [i.item_id for i in third] == ["i10", "i11"]
    assert store.claim("j", "runner-c", 5, lease_s=60) == []
    assert store.leased("j") == 12
    assert store.leased("j", exclude_owner="runner-a") == 5
    # A released lease is claimable again; another owner's lease is not released.
    assert store.release("j", "runner-b", ["i5", "i6"]) == 2
    assert store.release("j", "runner-b", ["i0"]) == 0
    assert [i.item_id for i in store.claim("j", "runner-c", 5, lease_s=60)] == ["i5", "i6"]
    store.close()


def test_an_expired_lease_is_taken_over_and_renewal_keeps_it(database_url: str) -> None:
    store = _store(database_url)
    held = store.claim("j", "slow", 2, lease_s=0.3)
    kept = store.claim("j", "renewing", 2, lease_s=0.3)
    time.sleep(0.15)
    assert store.renew("j", "renewing", [i.item_id for i in kept], lease_s=60) == 2
    time.sleep(0.3)
    taken = store.claim("j", "other", 4, lease_s=60)
    # The lapsed lease's items come back first (input order), the renewed ones do not.
    assert [i.item_id for i in taken] == [i.item_id for i in held] + ["i4", "i5"]
    assert store.renew("j", "slow", [i.item_id for i in held], lease_s=60) == 0
    store.close()


def test_a_dead_local_runner_s_leases_are_freed_at_once(database_url: str) -> None:
    store = _store(database_url)
    gone = subprocess.run(
        [sys.executable, "-c", "from tribunal.jobs._store import runner_id; print(runner_id())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    store.claim("j", gone, 3, lease_s=3600)  # its process has exited: kill -9 alike
    live = runner_id()
    # The next claim on this host takes the dead runner's items over, in input order...
    assert [i.item_id for i in store.claim("j", live, 3, lease_s=3600)] == ["i0", "i1", "i2"]
    # ... and a live runner's lease stays its own.
    taken = store.claim("j", "resumed", 12, lease_s=60)
    assert [i.item_id for i in taken] == [f"i{n}" for n in range(3, 12)]
    store.close()


class _Counting:
    """Labels every item relevant, counting calls per item; refuses queries with "bad"."""

    def __init__(self, seconds: float = 0.01) -> None:
        self.calls: dict[str, int] = {}
        self.lock = threading.Lock()
        self.seconds = seconds

    def label(self, items: list[LabelItem]) -> list[ItemResult]:
        results = []
        for item in items:
            with self.lock:
                self.calls[item.item_id] = self.calls.get(item.item_id, 0) + 1
            time.sleep(self.seconds)
            if "bad" in item.query:
                results.append(failed_result(item.item_id, "query is refused"))
            else:
                results.append(ItemResult(item.item_id, 1, "JUDGES", tokens=5))
        return results

    def close(self) -> None:
        return None


def test_concurrent_runners_label_each_item_once(database_url: str) -> None:
    store = _store(database_url)
    labeller = _Counting()
    reports = []

    def run() -> None:
        own = JobStore(Database(database_url))
        reports.append(
            run_job(own, "j", labeller, mode="judge", workers=2, batch_size=2, progress=False)
        )
        own.close()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert labeller.calls == {item.item_id: 1 for item in ITEMS}
    assert sum(r.claimed for r in reports) == 12
    assert sum(r.labelled for r in reports) == 12
    assert sum(r.already_done for r in reports) == 0
    assert store.counts("j").finished == 12
    assert store.job("j").status == "done"
    store.close()


def test_refused_items_are_recorded_as_failed_and_the_job_goes_on(database_url: str) -> None:
    store = JobStore(Database(database_url))
    store.create_job("k", mode="judge", settings={}, source={})
    items = [
        LabelItem("ok-1", "what is the incubation period?", "two to fourteen days"),
        LabelItem("x" * 300, "long id", "passage"),
        LabelItem("long-query", "q" * 2_001, "passage"),
        LabelItem("too-many", "q", "passage", answers=("a",) * 17),
        LabelItem("bad-at-run", "a bad query", "passage"),
        LabelItem("ok-2", "do masks help?", "yes"),
    ]
    kept, failed = check_items(items, ItemLimits())
    assert len(kept) == 6
    assert set(failed) == {kept[1].item_id, "long-query", "too-many"}
    assert kept[1].item_id.startswith("long:")
    assert "server.max_id_chars" in failed[kept[1].item_id]
    assert "gateway.max_query_chars" in failed["long-query"]
    assert "gateway.max_answers_per_item" in failed["too-many"]
    store.add_items("k", kept, failed=failed)
    labeller = _Counting(seconds=0.0)
    report = run_job(store, "k", labeller, mode="judge", batch_size=2, progress=False)
    # Refused at input: never sent to the labeller. Refused while running: recorded too.
    assert set(labeller.calls) == {"ok-1", "bad-at-run", "ok-2"}
    assert (report.labelled, report.remaining, report.sources["FAILED"]) == (3, 0, 1)
    counts = store.counts("k")
    assert (counts.finished, counts.failed, counts.relevant) == (6, 4, 2)
    errors = {e.item.item_id: e.result.error for e in store.items("k") if e.result}
    assert errors["bad-at-run"] == "query is refused"
    assert errors["ok-1"] == ""
    assert store.job("k").status == "done"
    # A resume finds nothing to do: the failed items do not stop it.
    again = run_job(store, "k", labeller, mode="judge", progress=False)
    assert (again.claimed, again.remaining) == (0, 0)
    store.close()


@pytest.mark.parametrize("lease_s", [0.0, -1.0])
def test_the_lease_must_be_positive(database_url: str, lease_s: float) -> None:
    store = _store(database_url)
    with pytest.raises(ValueError, match="lease_s"):
        run_job(store, "j", _Counting(), mode="judge", lease_s=lease_s, progress=False)
    store.close()


def test_a_runner_that_ends_while_another_finishes_never_marks_the_job_running(
    database_url: str,
) -> None:
    """The end of two runners interleaved the worst way: the first reads what is left
    (the second's items) before the second writes its last results and ``done``, and
    writes its own status only after. The job must stay ``done``."""
    from tribunal.jobs._runner import RunReport, record_closing_status

    store = _store(database_url)
    store.set_status("j", "running")
    first = RunReport(job="j", mode="judge", runner="local", workers=1)
    first.remaining = first.held_by_others = 4  # the second runner still holds 4 items
    last = RunReport(job="j", mode="judge", runner="local", workers=1)
    record_closing_status(store, "j", last, finished_ok=True)  # the second: nothing left
    record_closing_status(store, "j", first, finished_ok=True)  # the first, late
    assert store.job("j").status == "done"
    # A run that failed, or left items nobody holds, stops the job.
    failed = RunReport(job="j", mode="judge", runner="local", workers=1)
    failed.remaining, failed.held_by_others = 4, 4
    record_closing_status(store, "j", failed, finished_ok=False)
    assert store.job("j").status == "stopped"
    store.close()
