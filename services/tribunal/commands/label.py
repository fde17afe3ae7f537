"""``tribunal label run|status|export|aggregate``: bulk relevance labelling jobs.

``run`` reads the input (JSONL, a BEIR folder, or TREC topics + run), registers the job
and its items in the store, labels every pending item through ``Gateway.Label``'s
pipeline (local worker threads, ``--ray`` for an actor pool, or ``--gateway`` for a
running gateway) and writes the outputs. ``--resume`` continues a job after any stop,
``kill -9`` included: each item ends labelled exactly once.
"""

from __future__ import annotations

import argparse
import importlib
import json
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, Settings
from ..core.settings import LABEL_MODES
from . import _label_estimate, _label_evaluate, _label_plan, _label_status
from ._label_common import input_spec, job_store, label_settings, relevance_version
from ._label_runner import run_label_job

__all__ = ["register"]

_OUTPUTS = {
    "labels": "labels.jsonl",
    "qrels": "qrels.txt",
    "holes": "qrels.holes.txt",
    "escalations": "escalations.jsonl",
}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("label", help="bulk relevance labelling jobs (run, status, export)")
    actions = parser.add_subparsers(dest="label_command", required=True, metavar="ACTION")

    run = actions.add_parser(
        "run", help="label every item of an input; --resume continues a stopped job"
    )
    run.add_argument("--job", required=True, help="job name (the store's key)")
    run.add_argument(
        "--input",
        type=Path,
        default=None,
        help="JSONL file, BEIR folder, or TREC topics file (on --resume: the job's own)",
    )
    run.add_argument(
        "--format", choices=("jsonl", "beir", "trec"), default=None, help="default: by --input"
    )
    run.add_argument("--run", type=Path, default=None, help="TREC run of candidates (BEIR, TREC)")
    run.add_argument("--qrels", type=Path, default=None, help="TREC: qrels of judged pairs")
    run.add_argument("--corpus", type=Path, default=None, help="TREC: docid<TAB>text or JSONL")
    run.add_argument("--depth", type=int, default=None, help="candidates per query from --run")
    run.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    run.add_argument(
        "--field",
        action="append",
        default=[],
        metavar="FIELD=KEY",
        help="JSONL: read item FIELD (query, chunk, answers, item_id, query_id, doc_id, "
        "gold) from KEY",
    )
    run.add_argument("--limit", type=int, default=None, help="only the first N input items")
    run.add_argument(
        "--mode",
        choices=LABEL_MODES,
        default=None,
        help="judges then debate when unsure (cascade), DREAM on every item (debate), or "
        "the judges alone (judge); default: gateway.label_mode (judge in the tiny profile)",
    )
    run.add_argument("--resume", action="store_true", help="continue an existing job")
    run.add_argument("--workers", type=int, default=None, help="worker threads / Ray actors")
    run.add_argument(
        "--batch-size",
        type=int,
        default=None,
        help="items per worker call (default: 64 in judge mode and under --plan, whose "
        "items share the embedder's forward passes, else 4)",
    )
    run.add_argument(
        "--lease-seconds",
        type=float,
        default=300.0,
        help="how long this runner holds the items it claimed (renewed while it works; "
        "other runners on the job take an item whose lease lapsed)",
    )
    run.add_argument("--ray", action="store_true", help="run on Ray Data with an actor pool")
    run.add_argument("--ray-address", default=None, help="an existing Ray cluster (--ray)")
    run.add_argument("--gateway", default=None, help="host:port of a running gateway")
    run.add_argument("--token", default=None, help="bearer token of --gateway")
    run.add_argument(
        "--tls-ca",
        type=Path,
        default=None,
        help="PEM CA of --gateway's TLS certificate (needed with --token unless --gateway "
        "is a loopback address: a token is never sent in plaintext over the network)",
    )
    run.add_argument(
        "--tls-server-name", default="", help="the name --gateway's certificate is issued for"
    )
    run.add_argument("--database-url", default=None, help="default: settings.database_url")
    run.add_argument("--profile", default=None, help="profile name or YAML path")
    run.add_argument(
        "--out", type=Path, default=None, help="outputs folder (default DATA_DIR/jobs/JOB)"
    )
    run.add_argument("--no-progress", action="store_true", help="no progress bar")
    run.add_argument("--report", type=Path, default=None, help="write the cost report as JSON")
    _label_estimate.add_arguments(run)
    run.set_defaults(func=_run)

    _label_status.register(actions)

    export = actions.add_parser(
        "export", help="labels JSONL, qrels (+ holes), escalation queue of a job"
    )
    export.add_argument("--job", required=True)
    export.add_argument("--out", type=Path, default=None, help="folder for all four files")
    for name, default in _OUTPUTS.items():
        export.add_argument(f"--{name}", type=Path, default=None, help=f"default OUT/{default}")
    export.add_argument("--database-url", default=None)
    export.add_argument("--profile", default=None)
    export.set_defaults(func=_export)

    compare = actions.add_parser(
        "compare", help="jobs side by side against their gold grades (bAcc, escalation, cost)"
    )
    compare.add_argument("jobs", nargs="+", help="job names")
    compare.add_argument(
        "--relevant-at", type=int, default=2, help="gold grade at or above which = relevant"
    )
    compare.add_argument(
        "--only", type=Path, default=None, help="a file of item ids (one per line): just these"
    )
    compare.add_argument("--out", type=Path, default=None, help="write the report as JSON")
    compare.add_argument("--database-url", default=None)
    compare.add_argument("--profile", default=None)
    compare.set_defaults(func=_compare)

    _register_more(actions, run)


def _register_more(
    actions: argparse._SubParsersAction,  # type: ignore[type-arg]
    run: argparse.ArgumentParser,
) -> None:
    """``label plan`` and ``run --plan`` (certified plans), ``label aggregate`` (human
    labels): each lives in its own module."""
    _label_plan.register(actions, run)
    _label_evaluate.register(actions)
    name = f"{__package__}._label_aggregate"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != name:
            raise
        return  # not installed yet: `label` works without it
    aggregate = actions.add_parser(
        "aggregate", help="aggregate human votes on escalated items into labels"
    )
    module.add_arguments(aggregate)
    aggregate.set_defaults(func=module.run)


def _provenance(settings: Settings, mode: str) -> dict[str, Any]:
    roles = settings.roles
    return {
        "profile": settings.profile,
        "llm_backend": settings.llm_backend,
        "judges": list(settings.ensemble.judges) if settings.ensemble.judges else None,
        "judge_models": list(roles.judges) if roles else None,
        "debate_agents": list(roles.debate_agents) if roles else None,
        "aggregator": settings.ensemble.aggregator,
        "label_relevant_at": settings.gateway.label_relevant_at,
        "label_irrelevant_at": settings.gateway.label_irrelevant_at,
        "label_max_rounds": settings.gateway.label_max_rounds,
        "relevance_artifact": relevance_version(settings),
        "mode": mode,
    }


def _run(args: argparse.Namespace) -> int:
    from ..jobs import check_job_name

    check_job_name(args.job)
    for name in ("workers", "batch_size", "limit", "depth"):
        value = getattr(args, name)
        if value is not None and value < 1:
            raise InvalidArgumentError(f"--{name.replace('_', '-')} must be >= 1", field=name)
    if args.lease_seconds <= 0:
        raise InvalidArgumentError("--lease-seconds must be > 0", field="lease_seconds")
    if args.ray and args.gateway:
        raise InvalidArgumentError("choose --ray or --gateway, not both", field="ray")
    settings = label_settings(args)
    if args.estimate is not None:
        return _estimate(args, settings)
    store = job_store(settings)
    try:
        plan = _label_plan.plan_for_run(args, store)
        if plan is not None:
            settings = _label_plan.apply_plan(settings, plan, str(args.plan or "PLAN"))
        mode = _open_job(args, settings, store, plan)
        report = run_label_job(args, settings, store, mode)
        print(report.text())
        if args.report is not None:
            args.report.parent.mkdir(parents=True, exist_ok=True)
            args.report.write_text(json.dumps(report.to_json(), indent=2) + "\n")
        if plan is not None:
            _label_plan.report_plan(store, args.job, plan, args.report)
        out = args.out or settings.data_dir / "jobs" / args.job
        _write_outputs(store, args.job, {name: out / file for name, file in _OUTPUTS.items()})
        # Items other runners of the job are labelling are theirs to finish.
        return 0 if report.remaining == report.held_by_others else 1
    finally:
        store.close()


def _estimate(args: argparse.Namespace, settings: Settings) -> int:
    """``--estimate``: the job's input (or a resumed job's pending items), a timed sample,
    the projection per mode; no job is created and nothing is written."""
    from ..jobs import ItemLimits, check_items, read_items

    if args.resume:
        store = job_store(settings)
        try:
            store.job(args.job)
            items = store.pending(args.job)
        finally:
            store.close()
    else:
        items = read_items(input_spec(args))[: args.limit]
    items, _ = check_items(items, ItemLimits.from_settings(settings))
    print(f"estimating on {min(args.estimate, len(items))} of {len(items)} item(s) ...", flush=True)
    print(
        _label_estimate.estimate_job(
            settings,
            items,
            sample=args.estimate,
            modes=args.estimate_modes,
            report=args.report,
        ),
        end="",
    )
    return 0


def _open_job(args: argparse.Namespace, settings: Settings, store: Any, plan: Any = None) -> str:
    """Register the job (or check the one resumed) and add its items; returns the mode.

    A job under a label ``plan`` runs in cascade mode and records the plan.

    Items are added on a resume too (idempotently): a job killed while its items were
    being inserted gets the rest.
    """
    from ..jobs import InputSpec, ItemLimits, check_items, read_items

    if args.resume:
        job = store.job(args.job)
        mode: str = args.mode or job.mode
        described = dict(job.source)
        spec = input_spec(args) if args.input is not None else InputSpec.from_description(described)
        limit = args.limit if args.limit is not None else described.get("limit")
        store.create_job(args.job, mode=mode, settings={}, source={}, resume=True)
    else:
        mode = "cascade" if plan is not None else args.mode or settings.gateway.label_mode
        spec = input_spec(args)
        limit = args.limit
    items = read_items(spec)[:limit]
    if not items:
        raise InvalidArgumentError(f"{spec.path} holds no items", field="input")
    if not args.resume:
        store.create_job(
            args.job,
            mode=mode,
            settings={
                **_provenance(settings, mode),
                **(_label_plan.plan_provenance(plan, args.plan) if plan is not None else {}),
            },
            source={**spec.describe(), "limit": limit},
        )
    # Items the pipeline would refuse are recorded as failed now, with the reason.
    items, failed = check_items(items, ItemLimits.from_settings(settings))
    added = store.add_items(args.job, items, failed=failed)
    counts = store.counts(args.job)
    print(
        f"job {args.job}: {counts.total} item(s), {counts.finished} already labelled, "
        f"{counts.pending} to label ({added} added now; mode {mode}; store "
        f"{store.db.engine.url.render_as_string()})",
        flush=True,
    )
    for item_id, reason in list(failed.items())[:5]:
        print(f"  item {item_id!r} cannot be labelled: {reason}", flush=True)
    if len(failed) > 5:
        print(f"  ... {len(failed) - 5} more (their reasons are in labels.jsonl)", flush=True)
    return mode


def _write_outputs(store: Any, job: str, paths: dict[str, Path]) -> None:
    from ..jobs import export_job

    counts = export_job(store, job, **paths)
    print(
        f"outputs: {counts.labels} labelled -> {paths['labels']}; {counts.qrels} qrels "
        f"({counts.holes} new holes -> {paths['holes']}) -> {paths['qrels']}; "
        f"{counts.escalations} for humans -> {paths['escalations']}"
        + (f"; {counts.pending} still pending" if counts.pending else "")
    )


def _export(args: argparse.Namespace) -> int:
    settings = label_settings(args)
    store = job_store(settings)
    try:
        store.job(args.job)
        out = args.out or settings.data_dir / "jobs" / args.job
        paths = {name: getattr(args, name) or out / file for name, file in _OUTPUTS.items()}
        _write_outputs(store, args.job, paths)
    finally:
        store.close()
    return 0


def _compare(args: argparse.Namespace) -> int:
    from ..jobs import compare_jobs, comparison_markdown

    store = job_store(label_settings(args))
    try:
        only = None
        if args.only is not None:
            if not args.only.is_file():
                raise InvalidArgumentError(f"--only {args.only}: no such file", field="only")
            only = args.only.read_text(encoding="utf-8").split()
        report = compare_jobs(store, args.jobs, relevant_at=args.relevant_at, only=only)
    finally:
        store.close()
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        args.out.with_suffix(".md").write_text(comparison_markdown(report), encoding="utf-8")
    print(comparison_markdown(report), end="")
    return 0
