"""Labelled traffic from the live audits: what ``tribunal calibrate --from-audit`` fits and
certifies on.

Each reviewed audit item of the collection is one labelled query. Its answers:

- an audited ACCEPT: the served entry when reviewers said it answers the query, none
  otherwise (an ACCEPT found wrong may still have had another right entry; counting it as
  unanswerable can only make the new certificate more conservative);
- an audited FALLBACK: the entry reviewers picked when asked *which entry, if any,
  answers this query* (the majority of the votes; none when "none" wins or no entry has
  a majority — again the conservative side), or, for votes cast before the page asked
  that, the best candidate when they said it answers.

**Weighting (the default).** ACCEPTs and FALLBACKs are audited at different shares (and
ACCEPTs by confidence stratum), so the reviewed items are not a uniform sample of the
traffic. Every item is kept and carries ``weight`` u = π_floor / π, its inverse inclusion
probability scaled into (0, 1] by π_floor, the smallest positive inclusion probability
of the audit design over the window's decisions (read from the audit trail: every
decision in the window, audited or not, records its π and the design's smallest share).
``tribunal calibrate`` then certifies with the inverse-probability-weighted betting test
(:mod:`tribunal.confidence._weighted`): with probability ≥ 1 − δ the hallucination rate
among accepted answers is ≤ α on traffic drawn like the audited traffic. When every
decision of the window had the same positive π the sample is uniform, the rows carry no
weight, and the configured method certifies as on any traffic file. Each row is its own
group (its audit id), so the fit / certify / held-out split is independent of the labels.

**Thinning (``weighting="thin"``).** The former way: each item is kept with probability
π_floor / π (seeded by its audit id), which leaves a uniform sample — valid too, but it
drops most of the labels of the most-audited stratum.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from sqlalchemy import select

from ..core import FailedPreconditionError, InvalidArgumentError
from ..core.storage import AuditDecisionRow, Database
from ._live import AuditVerdict, _calibrator, audit_verdicts

__all__ = [
    "WEIGHTINGS",
    "ServedAccepts",
    "audit_traffic",
    "design_floor",
    "served_accepts",
    "write_audit_traffic",
]

Weighting = Literal["ipw", "thin"]
WEIGHTINGS: tuple[Weighting, ...] = ("ipw", "thin")


def _uniform(seed: int, key: str) -> float:
    digest = hashlib.sha256(f"thin:{seed}:{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2.0**64


def design_floor(
    db: Database,
    *,
    collection: str,
    since: dt.datetime | None = None,
    decisions: tuple[str, ...] = ("ACCEPT", "FALLBACK"),
) -> tuple[float, bool]:
    """(π_floor, uniform) of the audit design over the collection's decisions in the
    window: the smallest positive inclusion probability (or, over both decisions, the
    configured smallest share) any decision recorded, and whether every decision had the
    same positive π. ``decisions``: ("ACCEPT",) for the floor among ACCEPTs only."""
    statement = select(AuditDecisionRow.created_at, AuditDecisionRow.detail).where(
        AuditDecisionRow.kind == "answer",
        AuditDecisionRow.collection == collection,
        AuditDecisionRow.decision.in_(decisions),
    )
    both = set(decisions) == {"ACCEPT", "FALLBACK"}
    floor, shares = 1.0, set()
    with db.session() as session:
        rows = session.execute(statement).all()
    for created_at, detail in rows:
        if since is not None and (created_at is None or _utc(created_at) < since):
            continue
        draw = detail.get("audit") if isinstance(detail, dict) else None
        if not isinstance(draw, dict) or float(draw.get("p", 0.0)) <= 0.0:
            continue
        share = float(draw["p"])
        shares.add(share)
        floor = min(floor, share, float(draw.get("min_p") or share) if both else share)
    return floor, len(shares) <= 1


def _answers(verdict: AuditVerdict) -> list[str]:
    if verdict.decision == "FALLBACK" and verdict.chosen is not None:
        return [verdict.chosen] if verdict.chosen else []
    return [verdict.entry_id] if verdict.answers else []


def audit_traffic(
    db: Database,
    *,
    collection: str,
    votes_per_item: int = 1,
    seed: int = 0,
    since: dt.datetime | None = None,
    weighting: Weighting = "ipw",
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The labelled queries and counts (reviewed, kept, answerable, the design floor);
    ``since``: only items audited from then on (today's traffic, not last month's)."""
    if weighting not in WEIGHTINGS:
        raise InvalidArgumentError(
            f"weighting {weighting!r}: use one of {', '.join(WEIGHTINGS)}", field="weighting"
        )
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
    floor, uniform = design_floor(db, collection=collection, since=since)
    floor = min([floor, *(v.inclusion for v in verdicts)])
    rows: list[dict[str, Any]] = []
    for verdict in sorted(verdicts, key=lambda v: v.audit_id):
        row: dict[str, Any] = {
            "query": verdict.query,
            "answers": _answers(verdict),
            "audit_id": verdict.audit_id,
            "group": verdict.audit_id,
        }
        if weighting == "thin":
            if _uniform(seed, verdict.audit_id) >= floor / verdict.inclusion:
                continue
        elif not uniform:
            row["weight"] = round(floor / verdict.inclusion, 12)
        rows.append(row)
    strata = Counter(v.decision for v in verdicts)
    counts: dict[str, Any] = {
        "reviewed": len(verdicts),
        "kept": len(rows),
        "answerable": sum(1 for row in rows if row["answers"]),
        "inclusion_floor_ppm": round(floor * 1e6),
        "weighting": "uniform" if uniform and weighting == "ipw" else weighting,
        "by_decision": dict(sorted(strata.items())),
    }
    return rows, counts


@dataclass(frozen=True)
class ServedAccepts:
    """The reviewed audited ACCEPTs of one calibrator version: what
    :func:`tribunal.confidence.served_threshold` certifies a stricter threshold on."""

    confidence: NDArray[np.float64]
    """The served confidence of each."""
    correct: NDArray[np.bool_]
    """Reviewers said the served entry answers the query."""
    weight: NDArray[np.float64] | None
    """u = π_floor / π with π_floor the smallest ACCEPT share; None when uniform."""


def served_accepts(
    db: Database,
    *,
    collection: str,
    calibrator_version: str,
    served: float | None = None,
    votes_per_item: int = 1,
    since: dt.datetime | None = None,
) -> ServedAccepts:
    """The reviewed audited ACCEPTs served by ``calibrator_version`` (from ``since`` on),
    with the served confidence read from each decision's audit row.

    Decisions served in a safe mode are left out (the population is the traffic served
    normally). ``served``: the threshold the sample is to speak for; ACCEPTs below it
    (a request's own, larger α) are left out — above it any such threshold accepted too.

    Raises:
        FailedPreconditionError: no such ACCEPT, or a decision of this version in the
            window was decided at a threshold above ``served`` (a request's own, smaller
            α): its queries above ``served`` could fall back, so the ACCEPTs are not a
            uniform sample of them — give a window after those decisions.
    """
    verdicts = {
        v.audit_id: v
        for v in audit_verdicts(db, votes_per_item=votes_per_item).values()
        if v.decision == "ACCEPT"
        and v.answers is not None
        and v.inclusion > 0.0
        and v.collection == collection
        and (since is None or (v.created_at is not None and _utc(v.created_at) >= since))
    }
    statement = select(
        AuditDecisionRow.id,
        AuditDecisionRow.created_at,
        AuditDecisionRow.decision,
        AuditDecisionRow.confidence,
        AuditDecisionRow.threshold,
        AuditDecisionRow.versions,
        AuditDecisionRow.detail,
    ).where(
        AuditDecisionRow.kind == "answer",
        AuditDecisionRow.collection == collection,
        AuditDecisionRow.decision.in_(("ACCEPT", "FALLBACK")),
    )
    with db.session() as session:
        rows = session.execute(statement).all()
    sample: list[tuple[str, float]] = []
    stricter = 0
    for audit_id, created_at, decision, confidence, threshold, versions, detail in rows:
        if _calibrator(versions) != calibrator_version:
            continue
        if since is not None and (created_at is None or _utc(created_at) < since):
            continue
        if isinstance(detail, dict) and detail.get("safe_mode"):
            continue
        if served is not None and threshold is not None and float(threshold) > served + 1e-12:
            stricter += 1
        if decision != "ACCEPT" or audit_id not in verdicts or confidence is None:
            continue
        if served is None or float(confidence) >= served:
            sample.append((audit_id, float(confidence)))
    if stricter:
        raise FailedPreconditionError(
            f"{stricter} decisions of calibrator {calibrator_version!r} in the window were "
            f"decided at a threshold above {served} (a request's own alpha): the audited "
            "ACCEPTs are not a uniform sample above it; give a window after them (--since)"
        )
    if not sample:
        raise FailedPreconditionError(
            f"no reviewed audited ACCEPTs of calibrator {calibrator_version!r} in collection "
            f"{collection!r}: audits need audit.accept_share > 0 and reviews"
        )
    sample.sort()
    floor, uniform = design_floor(db, collection=collection, since=since, decisions=("ACCEPT",))
    inclusion = np.asarray([verdicts[a].inclusion for a, _ in sample], dtype=np.float64)
    floor = min(floor, float(inclusion.min()))
    return ServedAccepts(
        confidence=np.asarray([c for _, c in sample], dtype=np.float64),
        correct=np.asarray([bool(verdicts[a].answers) for a, _ in sample], dtype=np.bool_),
        weight=None if uniform else floor / inclusion,
    )


def _utc(moment: dt.datetime) -> dt.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)


def write_audit_traffic(rows: list[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row, sort_keys=True) + "\n" for row in rows))
    return path
