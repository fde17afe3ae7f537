"""``tribunal-lab crowdrag``: reproduce the CrowdRAG-25 authors' MACE gold labels.

Per dimension: the product's MACE labels (``tribunal label aggregate``'s aggregation)
against the authors' gold, and Krippendorff's α against the paper's Table 4
(:mod:`tribunal_lab.crowdrag`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from tribunal.core import InvalidArgumentError

from .._paths import data_root

__all__ = ["register"]

_OUT = Path(".build/lab/crowdrag")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "crowdrag",
        help="CrowdRAG-25: reproduce the authors' MACE gold labels and Krippendorff's α",
        description=__doc__,
    )
    parser.add_argument(
        "--ratings",
        type=Path,
        default=data_root() / "crowdrag25" / "ratings.jsonl.gz",
        help="the CrowdRAG-25 ratings.jsonl.gz (default: DATA/crowdrag25/ratings.jsonl.gz)",
    )
    parser.add_argument("--seed", type=int, default=0, help="MACE restart r uses seed + r")
    parser.add_argument(
        "--restarts", type=int, default=20, help="MACE restarts (the CrowdRAG authors': 20)"
    )
    parser.add_argument(
        "--iterations", type=int, default=100, help="MACE iterations (the authors': 100)"
    )
    parser.add_argument(
        "--dimensions", default=None, help="comma-separated dimensions (default all seven)"
    )
    parser.add_argument(
        "--replicates",
        type=int,
        default=5,
        help="re-runs of the authors' own MACE with other random starts "
        "(context for the gaps; 0: none)",
    )
    parser.add_argument("--out", type=Path, default=_OUT, help=f"output folder (default {_OUT})")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..crowdrag import (
        CROWDRAG_DIMENSIONS,
        read_crowdrag,
        report_json,
        reproduce_crowdrag,
        reproduction_markdown,
    )

    if args.restarts < 1 or args.iterations < 1 or args.replicates < 0:
        raise InvalidArgumentError(
            "--restarts and --iterations must be at least 1, --replicates at least 0"
        )
    ratings = read_crowdrag(args.ratings)
    dimensions = (
        [d.strip() for d in args.dimensions.split(",") if d.strip()]
        if args.dimensions
        else list(CROWDRAG_DIMENSIONS)
    )
    reports, results = reproduce_crowdrag(
        ratings,
        dimensions=dimensions,
        seed=args.seed,
        n_restarts=args.restarts,
        n_iter=args.iterations,
        replicates=args.replicates,
        progress=not args.no_progress,
    )
    args.out.mkdir(parents=True, exist_ok=True)
    document = {
        "source": str(args.ratings),
        "n_tasks": ratings.n_tasks,
        "n_workers": ratings.n_workers,
        "seed": args.seed,
        "n_restarts": args.restarts,
        "n_iter": args.iterations,
        "replicates": args.replicates,
        "dimensions": report_json(reports),
    }
    (args.out / "crowdrag.json").write_text(json.dumps(document, indent=1) + "\n")
    with (args.out / "crowdrag_labels.jsonl").open("w") as handle:
        for dimension, result in results.items():
            for record in result.task_records():
                handle.write(json.dumps({"dimension": dimension, **record}) + "\n")
    table = reproduction_markdown(reports)
    (args.out / "crowdrag.md").write_text(table)
    print(table)
    return 0
