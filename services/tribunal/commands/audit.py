"""``tribunal audit list|show|stats|escalations|rethreshold``: read the gateway's decisions.

``stats`` also compares the live acceptance rate of the calibrated collection with
the coverage its calibrator was certified at (a drift signal), and reports the live
audit: the anytime-valid bound on the hallucination rate of accepted answers from the
reviewed audit sample, the serving mode (normal or safe), and the shift test of live
signals against the calibration traffic's.

Reads ``database_url`` (SQLite in ``data_dir`` by default; ``TRIBUNAL_DATABASE_URL``
for PostgreSQL). Read-only: the audit table refuses updates and deletes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, load_settings
from ..core.storage import Database, DecisionRecord
from ._audit_rethreshold import register_rethreshold
from ._since import parse_since

__all__ = ["register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("audit", help="query the gateway's audit trail and escalation queue")
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--database-url", default=None, help="default: settings.database_url")
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="recent decisions, newest first")
    listing.add_argument("--kind", choices=("answer", "label"), default=None)
    listing.add_argument("--decision", default=None, help="e.g. ACCEPT, FALLBACK, RELEVANT")
    listing.add_argument("--since", default=None, help="30m, 2h, 7d or ISO time")
    listing.add_argument("--query", default=None, help="only queries containing this text")
    listing.add_argument("--limit", type=int, default=20)
    listing.add_argument("--json", action="store_true", help="one JSON object per line")
    listing.set_defaults(func=_list)

    show = actions.add_parser("show", help="one decision with its signals and versions (JSON)")
    show.add_argument("audit_id")
    show.set_defaults(func=_show)

    stats = actions.add_parser(
        "stats",
        help="decision counts by kind, decision and reason; live acceptance rate against the "
        "coverage the calibrator was certified at (drift)",
    )
    stats.add_argument("--since", default=None, help="30m, 2h, 7d or ISO time")
    stats.add_argument(
        "--artifact",
        type=Path,
        default=None,
        help="calibrator artifact to compare with (default: the one the services load)",
    )
    stats.add_argument(
        "--alpha", type=float, default=None, help="its threshold to compare (confidence.alpha)"
    )
    stats.add_argument(
        "--collection",
        default=None,
        help="the collection served with it (default: the one it was calibrated on)",
    )
    stats.set_defaults(func=_stats)

    queue = actions.add_parser("escalations", help="items waiting for human review")
    queue.add_argument("--status", default="open", help="open (default), or '' for all")
    queue.add_argument("--limit", type=int, default=50)
    queue.set_defaults(func=_escalations)

    register_rethreshold(actions)


def _database(args: argparse.Namespace) -> Database:
    url = args.database_url or load_settings(args.profile).database_url
    return Database(url)


def _list(args: argparse.Namespace) -> int:
    if args.limit < 1:
        raise InvalidArgumentError("--limit must be >= 1", field="limit")
    records = _database(args).decisions(
        kind=args.kind,
        decision=args.decision,
        since=parse_since(args.since) if args.since else None,
        query_contains=args.query,
        limit=args.limit,
    )
    if args.json:
        for record in records:
            print(json.dumps(record.to_json()))
        return 0
    header = f"{'time (UTC)':19}  {'kind':6}  {'decision':10}  {'reason':16}  {'conf':>5}"
    print(f"{header}  {'ms':>7}  query")
    for record in records:
        print(_row(record))
    return 0


def _row(record: DecisionRecord) -> str:
    when = record.created_at.strftime("%Y-%m-%d %H:%M:%S") if record.created_at else "-"
    confidence = f"{record.confidence:.2f}" if record.confidence is not None else "-"
    query = record.query if len(record.query) <= 60 else record.query[:57] + "..."
    return (
        f"{when:19}  {record.kind:6}  {record.decision:10}  {record.reason or '-':16}  "
        f"{confidence:>5}  {record.total_ms:7.0f}  {query}  [{record.id}]"
    )


def _show(args: argparse.Namespace) -> int:
    print(json.dumps(_database(args).decision(args.audit_id).to_json(), indent=2))
    return 0


def _stats(args: argparse.Namespace) -> int:
    database = _database(args)
    since = parse_since(args.since) if args.since else None
    counts = database.decision_counts(since=since)
    summary: dict[str, Any] = {}
    for kind, by_decision in sorted(counts.items()):
        total = sum(by_decision.values())
        summary[kind] = {
            "total": total,
            "counts": dict(sorted(by_decision.items())),
            "shares": {k: round(v / total, 4) for k, v in sorted(by_decision.items())},
        }
    drift = _acceptance_drift(args, database, since)
    if drift is not None:
        summary["acceptance_vs_certified"] = drift
    summary["live_audit"] = _live_audit(args, database)
    print(json.dumps(summary, indent=2))
    return 0


def _acceptance_drift(
    args: argparse.Namespace, database: Database, since: dt.datetime | None
) -> dict[str, Any] | None:
    """Live acceptance rate of the calibrated collection against the certified coverage.

    The certified coverage is the share of calibration queries the threshold accepted;
    if live traffic is like the calibration traffic (what the guarantee assumes), the live
    acceptance rate stays near it. A two-sided exact binomial test says how surprising the
    live count is; a small p-value is a drift signal: recalibrate on recent traffic.
    """
    from scipy import stats

    from ..confidence import CalibratorArtifact, default_artifact_path

    settings = load_settings(args.profile)
    path = args.artifact or default_artifact_path(settings)
    artifact = CalibratorArtifact.load(path)
    alpha = args.alpha if args.alpha is not None else settings.confidence.alpha
    threshold = artifact.threshold_for(alpha)
    binding = artifact.binding
    collection = args.collection or (binding.collection if binding is not None else None)
    by_decision = database.decision_counts(since=since, collection=collection).get("answer", {})
    total = sum(by_decision.values())
    accepted = sum(v for k, v in by_decision.items() if k.split("/")[0] == "ACCEPT")
    out: dict[str, Any] = {
        "calibrator": artifact.version,
        "collection": collection,
        "alpha": alpha,
        "certified": threshold.certified,
        "certified_coverage": round(threshold.coverage, 4),
        "certified_on": threshold.n,
        "method": threshold.method,
        "answers": total,
        "accepted": accepted,
    }
    if not total:
        out["note"] = "no answer decisions in this window"
        return out
    live = accepted / total
    interval = stats.binomtest(accepted, total).proportion_ci(0.95, method="exact")
    out["acceptance_rate"] = round(live, 4)
    out["acceptance_rate_ci95"] = [round(interval.low, 4), round(interval.high, 4)]
    if threshold.certified and 0.0 < threshold.coverage < 1.0:
        p_value = stats.binomtest(accepted, total, threshold.coverage).pvalue
        out["p_value"] = round(float(p_value), 6)
        out["drift"] = bool(p_value < 0.01)
        out["note"] = (
            "live acceptance differs from the certified coverage (p < 0.01): traffic may "
            "no longer be like the calibration traffic; recalibrate with `tribunal calibrate`"
            if out["drift"]
            else "live acceptance is consistent with the certified coverage"
        )
    return out


def _live_audit(args: argparse.Namespace, database: Database) -> dict[str, Any]:
    """The live bound and serving mode of the calibrated collection, recomputed from the
    reviews now (a change is recorded, as after a review)."""
    from ..audit import LiveMonitor
    from ..confidence import CalibratorArtifact, default_artifact_path

    settings = load_settings(args.profile)
    artifact = CalibratorArtifact.load(args.artifact or default_artifact_path(settings))
    alpha = args.alpha if args.alpha is not None else settings.confidence.alpha
    binding = artifact.binding
    collection = args.collection or (binding.collection if binding is not None else None)
    if collection is None:
        return {"note": "the artifact is bound to no collection: pass --collection"}
    state, shift = LiveMonitor(database, settings.audit).refresh(
        collection=collection,
        calibrator_version=artifact.version,
        alpha=alpha,
        reference=artifact.reference or None,
        actor="cli",
    )
    out = state.to_json()
    out["estimate"] = state.detail.get("estimate")
    out["pending_reviews"] = state.detail.get("pending")
    out["shift"] = None if shift is None else shift.to_json()
    restarted = state.detail.get("restarts") or []
    # The latest restarted bound (answers since the shift warning came on, or the last
    # scheduled restart); all of them are in detail.restarts.
    out["restarted"] = restarted[-1] if restarted else None
    out["note"] = (
        f"SAFE MODE ({state.mode}): the live rate is above alpha at confidence "
        f"{1 - state.delta:g}; raise the served threshold with `tribunal audit rethreshold "
        f"-o NEW.json` (from the audited ACCEPTs), or refit with `tribunal calibrate "
        f"--collection {collection} --from-audit`"
        if state.mode != "normal"
        else "the live bounds (cumulative and restarted) hold at every time at once with "
        f"probability >= {1 - state.delta:g}, whatever the traffic"
    )
    return out


def _escalations(args: argparse.Namespace) -> int:
    for record in _database(args).escalations(status=args.status or None, limit=args.limit):
        print(
            json.dumps(
                {
                    "id": record.id,
                    "created_at": record.created_at.isoformat() if record.created_at else None,
                    "item_id": record.item_id,
                    "reason": record.reason,
                    "query": record.query,
                    "audit_id": record.audit_id,
                    "status": record.status,
                }
            )
        )
    return 0
