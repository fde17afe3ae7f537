"""Retriever metrics from judge labels and a small human sample, checked against full qrels.

TREC DL 2019: five runs (top 100 of 43 queries), the full NIST qrels as the truth. The
qrels are hidden except for a random human sample of the pooled pairs; the judge (the
profile's relevance artifact, on cached embedding cosines: the served judge's numbers)
labels every pooled pair once (cached). For each human budget (a share of the pool) and
sample design, ``--samples`` random samples each go through the product's estimator
(:func:`tribunal.jobs._ppi.estimate_metrics`) and we report:

- coverage: how often the (1 − α) interval holds the true metric (the runs' metric under
  the qrels restricted to the pool — unjudged pooled pairs count as not relevant, as in
  trec_eval; what any pool-based estimate estimates);
- mean width, against a humans-only estimate from a uniform sample of the same budget;
- pairwise differences: how often an interval excludes 0, and then how often its sign is
  right;
- Kendall τ of the run ranking (each estimator's point estimates) against the truth's.

    tribunal-lab eval label-evaluate [--budgets 0.05 0.10] [--samples 200] [--depth 100]
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._io import read_jsonl
from .._paths import data_root
from ._relevance_pairs import Pair, artifact_scores

__all__ = ["add_arguments", "run"]

DESIGNS = ["uniform", "uncertainty"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset", type=Path, default=None, help="TREC DL folder (runs/, qrels, passages)"
    )
    parser.add_argument("--depth", type=int, default=100, help="pool depth per run")
    parser.add_argument(
        "--judge-depth",
        type=int,
        default=100,
        help="the judge labels only pairs some run ranks within this depth (its cost); "
        "deeper pooled pairs are predicted from the runs' ranks and the human sample",
    )
    parser.add_argument("--budgets", type=float, nargs="+", default=[0.05, 0.10])
    parser.add_argument("--designs", nargs="+", default=DESIGNS)
    parser.add_argument("--samples", type=int, default=200, help="random human samples")
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--relevant-at", type=int, default=2)
    parser.add_argument("--artifact", type=Path, default=None, help="default: the profile's")
    parser.add_argument("--profile", default=None)
    parser.add_argument("--out", type=Path, default=Path(".build/eval/label-evaluate.json"))


def _pool_pairs(folder: Path, pool: Any, qrels: dict[tuple[str, str], int]) -> list[Pair]:
    queries = {
        str(r["qid"]): str(r["query"]) for r in read_jsonl(folder / "dl19_judged_pairs.jsonl")
    }
    passages = {str(r["pid"]): str(r["passage"]) for r in read_jsonl(folder / "passages.jsonl")}
    missing = [pair for pair in pool.pairs if pair[0] not in queries or pair[1] not in passages]
    if missing:
        raise SystemExit(f"{len(missing)} pooled pairs lack a query or passage text: {missing[:3]}")
    return [
        Pair(qid, queries[qid], pid, passages[pid], qrels.get((qid, pid), 0), 0)
        for qid, pid in pool.pairs
    ]


def _judge_scores(pairs: list[Pair], args: argparse.Namespace) -> tuple[NDArray[Any], Any]:
    from tribunal.core import load_settings
    from tribunal.ensemble import RelevanceArtifact, relevance_artifact_path

    settings = load_settings(args.profile)
    artifact = RelevanceArtifact.load(args.artifact or relevance_artifact_path(settings))
    started = time.perf_counter()
    scores = artifact_scores(pairs, artifact, settings)
    print(f"judge: {len(pairs)} pairs scored in {time.perf_counter() - started:.0f} s", flush=True)
    return scores, artifact


def _truth_by_ir_measures(
    pool: Any, runs: dict[str, dict[str, list[str]]], grades: NDArray[np.int64], relevant_at: int
) -> dict[tuple[str, str], float]:
    """Each run's metrics under the qrels restricted to the pool (ir-measures)."""
    import ir_measures

    qrels = [
        ir_measures.Qrel(qid, docid, int(g))
        for (qid, docid), g in zip(pool.pairs, grades, strict=True)
    ]
    measures = {
        "nDCG@10": ir_measures.nDCG @ 10,
        "P@10": ir_measures.P(rel=relevant_at) @ 10,
        "R@100": ir_measures.R(rel=relevant_at) @ 100,
    }
    truth = {}
    for run, ranking in runs.items():
        scored = [
            ir_measures.ScoredDoc(qid, docid, float(-rank))
            for qid, docids in ranking.items()
            for rank, docid in enumerate(docids[:100])
        ]
        values = ir_measures.calc_aggregate(list(measures.values()), qrels, scored)
        for name, measure in measures.items():
            truth[(run, name)] = float(values[measure])
    return truth


def run(args: argparse.Namespace) -> int:
    from tribunal.jobs._ir_inputs import read_qrels
    from tribunal.jobs._ppi import PoolLabels, grades_to_indicators
    from tribunal.jobs._ppi_pool import METRICS, RunPool, metric_values
    from tribunal.jobs._ppi_trec import read_scored_run

    from ._ppi_simulation import simulate, write_outputs

    folder = args.dataset or data_root() / "trec-dl-2019"
    runs = {path.stem: read_scored_run(path) for path in sorted((folder / "runs").glob("*.trec"))}
    qrels = read_qrels(folder / "qrels.dl19-passage.txt")
    pool = RunPool.build(runs, depth=args.depth)
    pairs = _pool_pairs(folder, pool, qrels)
    grades = np.array([p.grade for p in pairs], dtype=np.int64)
    print(
        f"pool: {len(runs)} runs, {len(pool.queries)} queries, {pool.size} pairs at depth "
        f"{args.depth} ({int(np.sum([pair in qrels for pair in pool.pairs]))} with a qrels line)",
        flush=True,
    )
    best = np.min(np.stack([np.where(r > 0, r, 10**9) for r in pool.ranks.values()]), axis=0)
    judged = best <= args.judge_depth
    judged_scores, artifact = _judge_scores(
        [p for p, j in zip(pairs, judged, strict=True) if j], args
    )
    scores = np.full(pool.size, np.nan)
    scores[judged] = judged_scores
    print(f"judge: {int(judged.sum())} of {pool.size} pairs (best rank <= {args.judge_depth})")
    truth = _truth_by_ir_measures(pool, runs, grades, args.relevant_at)
    truth_z = grades_to_indicators(grades, 3)
    for (run, name), value in truth.items():
        [spec] = [spec for spec in METRICS if spec.name == name]
        ours = float(np.mean(metric_values(pool, run, truth_z, spec, relevant_at=args.relevant_at)))
        if abs(ours - value) > 1e-9:
            raise SystemExit(f"{run} {name}: ir-measures {value} but the estimator's {ours}")
    base = PoolLabels(
        known=np.full(pool.size, -1, dtype=np.int64),
        judge_p=scores,
        judge_label=(np.nan_to_num(scores) >= artifact.threshold).astype(np.int64),
        human=np.full(pool.size, -1, dtype=np.int64),
        query_of=pool.query_of,
        levels=3,
        relevant_at=args.relevant_at,
    )
    started = time.perf_counter()
    results = simulate(pool, base, grades, truth, args)
    report: dict[str, Any] = {
        "command": "tribunal-lab eval label-evaluate "
        + " ".join(f"--budgets {' '.join(map(str, args.budgets))}".split())
        + (f" --designs {' '.join(args.designs)}" if args.designs != DESIGNS else "")
        + f" --samples {args.samples} --depth {args.depth} --judge-depth {args.judge_depth}",
        "date": dt.date.today().isoformat(),
        "dataset": str(folder),
        "pool": {"pairs": pool.size, "queries": len(pool.queries), "runs": sorted(runs)},
        "judge": {
            "artifact": artifact.version,
            "threshold": artifact.threshold,
            "depth": args.judge_depth,
            "pairs": int(judged.sum()),
        },
        "alpha": args.alpha,
        "truth": {f"{run} {metric}": round(v, 4) for (run, metric), v in truth.items()},
        "seconds": round(time.perf_counter() - started, 1),
        **results,
    }
    write_outputs(report, args.out)
    return 0
