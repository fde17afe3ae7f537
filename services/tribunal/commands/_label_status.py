"""``tribunal label status``: each job's counts, and whether it is running or abandoned.

A runner holds the items it labels under leases it renews while it works (the local
runner per batch, the Ray runner by a heartbeat). A job is **running** while some
runner holds a live lease on its pending items — unexpired, and its process not known
to be gone (on this host that is checked at once) — and **abandoned** when it is marked
running but no runner holds anything: its runner stopped (``kill -9``, a lost machine)
before it could mark the job. ``tribunal label run --job NAME --resume`` continues it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from ._label_common import job_store, label_settings

__all__ = ["register", "run"]


def register(actions: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    status = actions.add_parser(
        "status", help="jobs, their counts, and whether each is running or abandoned"
    )
    status.add_argument("--job", default=None, help="one job (default: all)")
    status.add_argument("--database-url", default=None)
    status.add_argument("--profile", default=None)
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=run)


def _job_state(job: Any, counts: Any, holders: list[Any]) -> dict[str, Any]:
    """Where a job stands, from its leases: a job marked running whose items no live
    runner holds was abandoned (its runner stopped without marking it)."""
    live = [h for h in holders if not h.gone]
    state = job.status
    if counts.pending == 0:
        state = "done"
    elif live:
        state = "running"
    elif job.status == "running":
        state = "abandoned"
    return {
        "state": state,
        "runners": len(live),
        "leased": sum(h.items for h in live),
        "lease_until": max(h.expires_at for h in live).isoformat() if live else None,
    }


def run(args: argparse.Namespace) -> int:

    settings = label_settings(args)
    store = job_store(settings)
    try:
        jobs = [store.job(args.job)] if args.job else store.jobs()
        rows = []
        for job in jobs:
            counts = store.counts(job.name)
            rows.append(
                {
                    "job": job.name,
                    "mode": job.mode,
                    "status": job.status,
                    **_job_state(job, counts, store.lease_holders(job.name)),
                    "created_at": job.created_at.isoformat() if job.created_at else None,
                    **counts.to_json(),
                }
            )
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:
        print("no label jobs", file=sys.stderr)
        return 0
    print(
        "| job | mode | state | runners | total | labelled | relevant | escalated | pending "
        "| tokens |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in rows:
        cells = [
            row["job"],
            row["mode"],
            row["state"],
            row["runners"],
            row["total"],
            row["finished"],
            row["relevant"],
            row["escalated"],
            row["pending"],
            row["tokens"],
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")
    for row in rows:
        if row["state"] == "abandoned":
            print(
                f"job {row['job']}: marked running, but no runner holds any of its "
                f"{row['pending']} pending item(s): its runner stopped. Continue it with "
                f"`tribunal label run --job {row['job']} --resume`."
            )
        elif row["state"] == "running":
            print(
                f"job {row['job']}: {row['runners']} runner(s) hold {row['leased']} item(s); "
                f"their lease is renewed while they work (now until {row['lease_until']})."
            )
    return 0
