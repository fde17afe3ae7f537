"""``tribunal label status`` tells a running job from an abandoned one by its leases.

Real runners here are real processes holding real leases in the store (SQLite and
PostgreSQL): one that is killed with SIGKILL leaves its job marked running, and status
calls it abandoned at once (its process is gone); a live one renewing its leases with
the heartbeat is running.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from tribunal.cli import main
from tribunal.core.storage import Database
from tribunal.jobs import JobStore, LabelItem
from tribunal.jobs._heartbeat import LeaseHeartbeat
from tribunal.jobs._store import runner_id

ITEMS = [LabelItem(f"i{n}", f"query {n}", f"passage {n}") for n in range(6)]


def _status(url: str, capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    capsys.readouterr()
    assert main(["label", "status", "--database-url", url, "--job", "j", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    return dict(row)


def _holder(url: str) -> subprocess.Popen[str]:
    """A runner process: claims every item of job j, renews by heartbeat, waits."""
    code = textwrap.dedent(
        f"""
        import sys, time
        from tribunal.core.storage import Database
        from tribunal.jobs import JobStore
        from tribunal.jobs._heartbeat import LeaseHeartbeat
        from tribunal.jobs._store import runner_id
        store = JobStore(Database({url!r}))
        owner = runner_id()
        items = store.claim("j", owner, 100, lease_s=2.0)
        store.set_status("j", "running")
        LeaseHeartbeat(store, "j", owner, [i.item_id for i in items], lease_s=2.0).start()
        print(len(items), flush=True)
        time.sleep(600)
        """
    )
    return subprocess.Popen(
        [sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=os.environ.copy()
    )


def test_a_killed_runner_leaves_an_abandoned_job_a_live_one_a_running_one(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = JobStore(Database(database_url))
    store.create_job("j", mode="judge", settings={}, source={})
    store.add_items("j", ITEMS)
    row = _status(database_url, capsys)
    assert (row["status"], row["state"], row["pending"]) == ("created", "created", 6)

    runner = _holder(database_url)
    try:
        assert runner.stdout is not None
        assert runner.stdout.readline().strip() == "6"
        time.sleep(2.5)  # past the first lease: only the heartbeat keeps it
        row = _status(database_url, capsys)
        assert (row["state"], row["runners"], row["leased"]) == ("running", 1, 6)
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
        row = _status(database_url, capsys)
        # Still marked running in the store, every item pending: the runner is gone.
        assert (row["status"], row["state"], row["pending"]) == ("running", "abandoned", 6)
        capsys.readouterr()
        assert main(["label", "status", "--database-url", database_url]) == 0
        text = capsys.readouterr().out
        assert "| j | judge | abandoned | 0 |" in text
        assert "tribunal label run --job j --resume" in text
    finally:
        if runner.poll() is None:
            runner.kill()
    store.close()


def test_leases_of_another_host_count_until_they_expire(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = JobStore(Database(database_url))
    store.create_job("j", mode="judge", settings={}, source={})
    store.add_items("j", ITEMS)
    store.set_status("j", "running")
    # A runner elsewhere: its process cannot be checked from here, only its lease.
    store.claim("j", "elsewhere/123/456/abcd", 2, lease_s=1.0)
    row = _status(database_url, capsys)
    assert (row["state"], row["leased"]) == ("running", 2)
    time.sleep(1.3)
    assert _status(database_url, capsys)["state"] == "abandoned"
    store.close()


def test_the_heartbeat_keeps_leases_past_their_length_and_stops_when_asked(
    database_url: str,
) -> None:
    store = JobStore(Database(database_url))
    store.create_job("j", mode="judge", settings={}, source={})
    store.add_items("j", ITEMS)
    owner = runner_id()
    ids = [item.item_id for item in store.claim("j", owner, 3, lease_s=0.6)]
    with LeaseHeartbeat(store, "j", owner, ids, lease_s=0.6):
        time.sleep(1.5)
        assert store.leased("j") == 3
    time.sleep(0.9)
    assert store.leased("j") == 0  # no heartbeat: they lapsed
    store.close()
