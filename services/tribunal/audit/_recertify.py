"""Labelled traffic from the live audits: what ``tribunal calibrate --from-audit`` fits and
certifies on.

Each reviewed audit item of the collection is one labelled query: its answers are the
entry reviewers saw when they said it answers the query, and none otherwise (an ACCEPT
found wrong may still have had another right entry; counting it as unanswerable can only
make the new certificate more conservative). ACCEPTs and FALLBACKs are audited at
different shares, so the items are first thinned to one share: each is kept with
probability π_min / π (seeded by its decision id), which leaves a uniform random sample
of the audited live traffic — what a certificate on "traffic like this" needs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path
from typing import Any

from ..core import FailedPreconditionError
from ..core.storage import Database
from ._live import audit_verdicts

__all__ = ["audit_traffic", "write_audit_traffic"]


def _uniform(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"thin:{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def audit_traffic(
    db: Database,
    *,
    collection: str,
    votes_per_item: int = 1,
    seed: int = 0,
    since: dt.datetime | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The labelled queries and counts (reviewed, kept after thinning, answerable);
    ``since``: only items audited from then on (today's traffic, not last month's)."""
    verdicts = [
        v
        for v in audit_verdicts(db, votes_per_item=votes_per_item).values()
        if v.answers is not None
        and v.inclusion > 0.0
        and v.collection == collection
        and (since is None or (v.created_at is not None and _utc(v.created_at) >= since))
    ]
    if not verdicts:
        raise FailedPreconditionError(
            f"no reviewed audit items for collection {collection!r}: audits need "
            "audit.accept_share / audit.fallback_share > 0 and reviews (`tribunal review serve`)"
        )
    floor = min(v.inclusion for v in verdicts)
    rows: list[dict[str, Any]] = []
    for verdict in sorted(verdicts, key=lambda v: v.audit_id):
        if _uniform(seed, verdict.audit_id) >= floor / verdict.inclusion:
            continue
        rows.append(
            {
                "query": verdict.query,
                "answers": [verdict.entry_id] if verdict.answers else [],
                "audit_id": verdict.audit_id,
            }
        )
    counts = {
        "reviewed": len(verdicts),
        "kept": len(rows),
        "answerable": sum(1 for row in rows if row["answers"]),
        "inclusion_floor_ppm": round(floor * 1e6),
    }
    return rows, counts


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def write_audit_traffic(rows: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    return path
