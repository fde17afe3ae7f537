"""``tribunal label evaluate``: retrieval metrics of TREC runs with confidence intervals
from judge labels on the pool and a human sample.

The holes of the runs' pool (pairs without a line in ``--qrels``) become a judge-mode
label job (leases, ``kill -9`` and resume, progress, audit rows); the human sample is
queued for review once the judge is done; each run of the command reads the reviews
that have arrived and prints the current intervals (``--watch`` keeps doing so).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

from ..core import FailedPreconditionError, InvalidArgumentError

__all__ = ["register"]

_DESIGNS = ("uniform", "uncertainty")


def register(actions: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = actions.add_parser(
        "evaluate",
        help="nDCG@10, P@10, R@100 of TREC runs with confidence intervals from judge labels "
        "and a human sample (prediction-powered inference)",
    )
    parser.add_argument("--runs", type=Path, nargs="+", required=True, help="TREC run files")
    parser.add_argument("--job", required=True, help="job name (the store's key)")
    parser.add_argument(
        "--qrels", type=Path, default=None, help="existing qrels: they count as human labels"
    )
    parser.add_argument("--topics", type=Path, required=True, help="qid<TAB>query (or TREC)")
    parser.add_argument("--corpus", type=Path, required=True, help="docid<TAB>text or JSONL")
    parser.add_argument("--depth", type=int, default=100, help="pool depth per run (100)")
    budget = parser.add_mutually_exclusive_group(required=True)
    budget.add_argument("--budget", type=int, help="human labels to sample (items)")
    budget.add_argument(
        "--budget-share", type=float, help="human labels as a share of the pool's holes"
    )
    parser.add_argument(
        "--design",
        choices=_DESIGNS,
        default="uniform",
        help="uniform (default), or stratified by the judge's uncertainty and the pair's "
        "weight in the metrics (active inference; recorded inclusion probabilities): "
        "narrower, but its nDCG intervals under-covered on TREC DL 2019",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the human sample")
    parser.add_argument("--alpha", type=float, default=0.1, help="1 − confidence level")
    parser.add_argument("--relevant-at", type=int, default=2, help="grade that is relevant")
    parser.add_argument(
        "--metrics", nargs="+", default=["nDCG@10", "P@10", "R@100"], help="nDCG@K P@K R@K"
    )
    parser.add_argument(
        "--watch",
        type=float,
        nargs="?",
        const=30.0,
        default=None,
        metavar="SECONDS",
        help="re-read the reviews every SECONDS (30) and print the intervals when they change",
    )
    parser.add_argument("--workers", type=int, default=None)
    parser.add_argument("--batch-size", type=int, default=None)
    parser.add_argument("--lease-seconds", type=float, default=300.0)
    parser.add_argument("--out", type=Path, default=None, help="default DATA_DIR/jobs/JOB")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--profile", default=None)
    parser.set_defaults(func=run, ray=False, gateway=None, token=None, label_command="run")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check(args: argparse.Namespace) -> list[Any]:
    from ..jobs import check_job_name
    from ..jobs._ppi_pool import parse_metric

    check_job_name(args.job)
    if args.depth < 1:
        raise InvalidArgumentError("--depth must be >= 1", field="depth")
    if not 0.0 < args.alpha < 0.5:
        raise InvalidArgumentError("--alpha must be in (0, 0.5)", field="alpha")
    if args.budget is not None and args.budget < 2:
        raise InvalidArgumentError("--budget must be >= 2", field="budget")
    if args.budget_share is not None and not 0.0 < args.budget_share <= 1.0:
        raise InvalidArgumentError("--budget-share must be in (0, 1]", field="budget_share")
    if args.relevant_at < 1:
        raise InvalidArgumentError("--relevant-at must be >= 1", field="relevant_at")
    if args.watch is not None and args.watch <= 0:
        raise InvalidArgumentError("--watch SECONDS must be > 0", field="watch")
    try:
        return [parse_metric(text) for text in args.metrics]
    except ValueError as exc:
        raise InvalidArgumentError(str(exc), field="metrics") from None


def run(args: argparse.Namespace) -> int:
    from ..jobs import JobStore
    from ..jobs._ir_inputs import read_corpus, read_qrels, read_topics
    from ..jobs._ppi_job import evaluation_items
    from ..jobs._ppi_pool import RunPool
    from ..jobs._ppi_trec import read_scored_run, run_name

    metrics = _check(args)
    runs: dict[str, dict[str, list[str]]] = {}
    paths: dict[str, Path] = {}
    for path in args.runs:
        name = run_name(path, runs)
        runs[name], paths[name] = read_scored_run(path), path
    known = read_qrels(args.qrels) if args.qrels is not None else {}
    if args.qrels is not None and not known:
        raise InvalidArgumentError(f"{args.qrels}: the qrels have no lines", field="qrels")
    runs = dict(sorted(runs.items()))
    pool = RunPool.build(runs, depth=args.depth, known=known)
    levels = max([args.relevant_at, *known.values()])
    source = {
        "runs": {name: {"path": str(paths[name]), "sha256": _sha256(paths[name])} for name in runs},
        "qrels": {"path": str(args.qrels), "sha256": _sha256(args.qrels)} if args.qrels else None,
        "depth": args.depth,
    }
    holes = sum(1 for pair in pool.pairs if pair not in known)
    if holes < 2:
        raise InvalidArgumentError("the qrels judge every pooled pair: nothing to estimate")
    budget = args.budget if args.budget is not None else max(2, round(args.budget_share * holes))
    evaluation = {
        "design": args.design,
        "budget": budget,
        "seed": args.seed,
        "relevant_at": args.relevant_at,
        "levels": levels,
    }
    settings = _settings(args)
    store = JobStore.from_url(settings.database_url)
    try:
        if not _job_exists(store, args.job):
            topics = read_topics(args.topics)
            wanted = {docid for qid, docid in pool.pairs if (qid, docid) not in known}
            corpus = read_corpus(args.corpus, wanted)
            items = evaluation_items(pool, known, topics, corpus)
            store.create_job(
                args.job,
                mode="judge",
                settings={"evaluation": evaluation},
                source={"evaluation": source},
            )
            store.add_items(args.job, items)
        else:
            _check_same(store, args.job, source, evaluation)
        counts = store.counts(args.job)
        print(
            f"job {args.job}: {len(pool.queries)} queries, {len(runs)} runs, {pool.size} pooled "
            f"pairs ({pool.size - holes} in the qrels, {holes} holes for the judge; "
            f"{counts.finished} labelled, {counts.pending} to label); human budget {budget} "
            f"({args.design})",
            flush=True,
        )
        if counts.pending:
            _judge(args, settings, store)
        return _estimate_loop(
            args, store, pool=pool, known=known, metrics=metrics, evaluation=evaluation
        )
    finally:
        store.close()


def _settings(args: argparse.Namespace) -> Any:
    from ._label_common import label_settings

    return label_settings(args)


def _job_exists(store: Any, job: str) -> bool:
    from ..core import NotFoundError

    try:
        store.job(job)
    except NotFoundError:
        return False
    return True


def _check_same(store: Any, job: str, source: dict[str, Any], evaluation: dict[str, Any]) -> None:
    info = store.job(job)
    recorded = info.source.get("evaluation")
    if recorded is None:
        raise FailedPreconditionError(f"job {job!r} is a label job, not an evaluation")
    if recorded != source or info.settings.get("evaluation") != evaluation:
        raise FailedPreconditionError(
            f"job {job!r} evaluates other runs, qrels, depth or sample design "
            f"({json.dumps(recorded)}; {json.dumps(info.settings.get('evaluation'))}): use a "
            "new --job for these"
        )


def _judge(args: argparse.Namespace, settings: Any, store: Any) -> None:
    from ._label_runner import run_label_job

    report = run_label_job(args, settings, store, "judge")
    print(report.text(), flush=True)
    if report.remaining:
        raise FailedPreconditionError(
            f"job {args.job}: {report.remaining} pair(s) still unlabelled; run again to resume"
        )


def _estimate_loop(
    args: argparse.Namespace,
    store: Any,
    *,
    pool: Any,
    known: Any,
    metrics: list[Any],
    evaluation: dict[str, Any],
) -> int:
    from ..jobs._ppi import estimate_metrics
    from ..jobs._ppi_job import pool_labels, queue_sample

    out = args.out or _settings(args).data_dir / "jobs" / args.job
    sample = None
    reviewed = -1
    while True:
        labels = pool_labels(
            store,
            args.job,
            pool,
            known,
            levels=evaluation["levels"],
            relevant_at=evaluation["relevant_at"],
        )
        if sample is None:
            sample = queue_sample(
                store,
                args.job,
                pool,
                labels,
                budget=evaluation["budget"],
                design=evaluation["design"],
                seed=evaluation["seed"],
                metrics=metrics,
            )
        estimates = estimate_metrics(pool, labels, sample, metrics=metrics, alpha=args.alpha)
        if estimates.reviewed != reviewed:
            reviewed = estimates.reviewed
            _write(out, estimates, metrics, evaluation)
            print(_markdown(estimates, metrics), flush=True)
            print(f"report: {out / 'evaluation.md'}, {out / 'evaluation.json'}", flush=True)
        if args.watch is None or estimates.reviewed >= estimates.drawn:
            return 0
        time.sleep(args.watch)


def _markdown(estimates: Any, metrics: list[Any]) -> str:
    from ..jobs._ppi_report import estimates_markdown

    return str(estimates_markdown(estimates, metrics))


def _write(out: Path, estimates: Any, metrics: list[Any], evaluation: dict[str, Any]) -> None:
    from ..jobs._plan_plot import plot_available
    from ..jobs._ppi_report import report_json, write_estimates_plot

    out.mkdir(parents=True, exist_ok=True)
    (out / "evaluation.md").write_text(_markdown(estimates, metrics), encoding="utf-8")
    data = report_json(estimates, metrics, {"evaluation": evaluation})
    (out / "evaluation.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    if plot_available():
        write_estimates_plot(estimates, metrics, out / "evaluation.png")
    else:
        print("no plot: matplotlib is not installed (the analysis extra)", flush=True)
