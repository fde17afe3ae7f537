"""``tribunal label aggregate``: human votes → labels (majority, MACE, Dawid–Skene).

``--votes FILE``: JSONL rows ``{"task", "worker", "label"}`` (what the review UI
exports). Writes per-task labels, per-worker competence and agreement under ``--out``;
``--job NAME`` also merges the labels into that labelling job (a task matches a job
item by item id or by the item's escalation id; labels relevant/irrelevant or 1/0).
Needs the ``analysis`` extra (crowd-kit, pandas, krippendorff, statsmodels).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, load_settings
from ._extras import require_extra

__all__ = ["add_arguments", "run"]

_ANALYSIS_MODULES = ("pandas", "crowdkit", "krippendorff", "statsmodels")
"""What vote aggregation imports beyond the runtime (the ``analysis`` extra)."""

_OUT = Path(".build/label-aggregate")
_BINARY = {"relevant": 1, "irrelevant": 0, "1": 1, "0": 0, "yes": 1, "no": 0}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Aggregate human votes into labels by majority vote, MACE or Dawid–Skene, with "
        "Fleiss' κ, Krippendorff's α and per-worker competence. No task or vote is dropped."
    )
    parser.add_argument(
        "--votes",
        type=Path,
        required=True,
        help="JSONL of {task, worker, label} rows (the review export)",
    )
    parser.add_argument(
        "--method", choices=("majority", "mace", "ds"), default="mace", help="default mace"
    )
    parser.add_argument("--seed", type=int, default=0, help="MACE restart r uses seed + r")
    parser.add_argument("--restarts", type=int, default=20, help="MACE restarts")
    parser.add_argument("--iterations", type=int, default=100, help="MACE/DS iterations")
    parser.add_argument(
        "--labels",
        default=None,
        help="comma-separated label order (ties go to the earliest; ordinal α uses it); "
        "default: sorted labels seen",
    )
    parser.add_argument(
        "--ordinal", action="store_true", help="--labels is a graded scale: report ordinal α"
    )
    parser.add_argument("--job", default=None, help="merge the final labels into this job")
    parser.add_argument("--database-url", default=None, help="job store (default: the profile's)")
    parser.add_argument("--profile", default=None, help="profile name or YAML path")
    parser.add_argument("--out", type=Path, default=_OUT, help=f"output folder (default {_OUT})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")


def run(args: argparse.Namespace) -> int:
    if args.restarts < 1 or args.iterations < 1:
        raise InvalidArgumentError("--restarts and --iterations must be at least 1")
    require_extra("analysis", _ANALYSIS_MODULES, what="tribunal label aggregate")
    from ..jobs import aggregate, read_votes

    votes = read_votes(args.votes)
    labels = [x.strip() for x in args.labels.split(",") if x.strip()] if args.labels else None
    if args.ordinal and not labels:
        raise InvalidArgumentError("--ordinal needs --labels in scale order, e.g. 0,1,2")
    result = aggregate(
        votes,
        args.method,
        args.seed,
        labels=labels,
        ordinal=args.ordinal,
        **(
            {
                "n_restarts": args.restarts,
                "n_iter": args.iterations,
                "progress": not args.no_progress,
            }
            if args.method == "mace"
            else {"n_iter": args.iterations}
        ),
    )
    summary = result.summary() | {"votes": str(args.votes), "n_votes": len(votes)}
    if args.job:
        summary["merge"] = _merge(args, result.labels, args.method)
    args.out.mkdir(parents=True, exist_ok=True)
    competence = result.competence.sort_values()
    document = {
        "summary": summary,
        "tasks": result.task_records(),
        "competence": {str(k): round(float(v), 6) for k, v in competence.items()},
    }
    (args.out / "aggregate.json").write_text(json.dumps(document, indent=1) + "\n")
    (args.out / "aggregate.md").write_text(_summary_markdown(summary))
    print(json.dumps(summary, indent=1))
    return 0


def _summary_markdown(summary: dict[str, Any]) -> str:
    agreement = summary["agreement"]

    def fmt(value: float | None) -> str:
        return "–" if value is None else f"{value:.3f}"

    return (
        "| method | tasks | workers | votes | tied | mean confidence | Fleiss κ | α nominal "
        "| α ordinal |\n|---|---|---|---|---|---|---|---|---|\n"
        f"| {summary['method']} | {summary['n_tasks']} | {summary['n_workers']} | "
        f"{summary['n_votes']} | {summary['n_tied']} | {summary['mean_confidence']:.3f} | "
        f"{fmt(agreement['fleiss_kappa'])} | {fmt(agreement['alpha_nominal'])} | "
        f"{fmt(agreement['alpha_ordinal'])} |\n"
    )


def _merge(args: argparse.Namespace, labels: Any, method: str) -> dict[str, int]:
    """Write each task's label as the human label of the job item it belongs to."""
    from ..jobs import JobStore

    binary: dict[str, int] = {}
    for task, label in labels.items():
        value = _BINARY.get(str(label).strip().lower())
        if value is None:
            raise InvalidArgumentError(
                f"task {task!r} has label {label!r}; a job takes relevant/irrelevant (or 1/0)"
            )
        binary[str(task)] = value
    settings = load_settings(args.profile)
    url = args.database_url or settings.database_url
    store = JobStore.from_url(url)
    try:
        store.job(args.job)  # NotFoundError names the job when it does not exist
        merged: set[str] = set()
        for entry in store.items(args.job):
            item_id = entry.item.item_id
            escalation = entry.result.escalation_id if entry.result else ""
            task = item_id if item_id in binary else escalation if escalation in binary else ""
            if task:
                store.set_human_label(args.job, item_id, binary[task], method)
                merged.add(task)
    finally:
        store.close()
    unmatched = len(binary) - len(merged)
    if unmatched:
        print(
            f"tribunal: {unmatched} aggregated task(s) match no item of job {args.job!r}",
            file=sys.stderr,
        )
    return {"merged": len(merged), "unmatched": unmatched}
