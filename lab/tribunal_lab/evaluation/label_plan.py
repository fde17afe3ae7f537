"""Certified auto-labels on judged pairs split by query: plan on one half, label the other.

The product's own code does the work — :func:`tribunal.jobs.fit_plan` fits the plan on
the plan half, :func:`tribunal.jobs.band_outcome` applies the label job's rule to the
run half — and the relevance judge is the profile's artifact evaluated on cached
embedding cosines (the served judge's numbers: same model, no prompt, same regression).

For each ε: the certified plan's share of run-half items left to humans and the error
rate of its automatic labels there (exact 95% interval); beside it a *plain* band (the
narrowest band whose observed plan-half error is ≤ ε, no confidence bound), the
*hindsight* band (any two thresholds on the judge's P, chosen on the run half itself:
the fewest humans any plan for this judge could need), and the judge artifact's own cascade
band. Then ``--splits`` further random query splits: how often each risk-control method
and the plain band keep the run-half error ≤ ε, and the humans each needs.

    tribunal-lab eval label-plan [--data PAIRS.jsonl] [--epsilons 0.05 0.10 0.15]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

from .._paths import data_root
from ._relevance_pairs import artifact_scores, cosines, load_pairs, split_queries

__all__ = ["add_arguments", "run"]

_DREAM = "DREAM (Llama-3.3-70B debate): 95.2% accuracy with 3.5% of items to humans"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", type=Path, default=None, help="judged pairs JSONL (TREC DL)")
    parser.add_argument("--relevant-at", type=int, default=2, help="grade counted relevant")
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.05, 0.10, 0.15])
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--method", default="ltt", help="risk control of the main table")
    parser.add_argument("--scheme", choices=("nested", "grid"), default="nested")
    parser.add_argument("--clusters", choices=("query", "none"), default="query")
    parser.add_argument("--calibrator", choices=("isotonic", "platt"), default="isotonic")
    parser.add_argument("--seed", type=int, default=13, help="the main plan/run query split")
    parser.add_argument("--splits", type=int, default=100, help="repeated random query splits")
    parser.add_argument(
        "--artifact", type=Path, default=None, help="relevance artifact (default: the profile's)"
    )
    parser.add_argument(
        "--judge",
        choices=("artifact", "gemma-cosine"),
        default="artifact",
        help="artifact: the relevance artifact (the served judge); gemma-cosine: "
        "EmbeddingGemma's query/document cosine, (1 + cos) / 2 (the plan recalibrates it)",
    )
    parser.add_argument(
        "--per-query", type=int, default=0, help="at most N pairs per query, seeded (0: all)"
    )
    parser.add_argument(
        "--write-halves",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write the main split's pairs as DIR/plan-half.jsonl and DIR/run-half.jsonl "
        "(inputs for `tribunal label run` / `label plan`)",
    )
    parser.add_argument("--profile", default=None)
    parser.add_argument("--out", type=Path, default=Path(".build/eval/label-plan.json"))


def _interval(errors: int, n: int) -> list[float]:
    if n == 0:
        return [0.0, 1.0]
    low = 0.0 if errors == 0 else float(stats.beta.ppf(0.025, errors, n - errors + 1))
    high = 1.0 if errors == n else float(stats.beta.ppf(0.975, errors + 1, n - errors))
    return [low, high]


def _hindsight(scores: NDArray[Any], gold: NDArray[Any], epsilon: float) -> float:
    """Fewest humans of any band — any two thresholds on the judge's P — whose error on
    these very items is ≤ ε: what no plan for this judge can beat."""
    order = np.argsort(scores, kind="stable")
    y = np.asarray(gold)[order]
    n = y.size
    # Auto-IRRELEVANT the k lowest (errors: relevant among them), auto-RELEVANT the j
    # highest (errors: irrelevant among them), k + j <= n.
    low_errors = np.concatenate([[0], np.cumsum(y)])
    high_errors = np.concatenate([[0], np.cumsum(1 - y[::-1])])
    best = 0
    for k in range(n + 1):
        j = np.arange(n - k + 1)
        ok = low_errors[k] + high_errors[j] <= epsilon * (k + j)
        if ok.any():
            best = max(best, k + int(j[ok].max()))
    return 1.0 - best / n


class _Halves:
    def __init__(self, pairs: list[Any], scores: NDArray[Any], seed: int) -> None:
        plan_q, _ = split_queries(pairs, seed)
        mask = np.array([p.qid in plan_q for p in pairs])
        gold = np.array([p.label for p in pairs])
        queries = np.array([p.qid for p in pairs])
        self.plan = (scores[mask], gold[mask], queries[mask])
        self.run = (scores[~mask], gold[~mask], queries[~mask])


def _fit(halves: _Halves, epsilon: float, args: argparse.Namespace, **options: Any) -> Any:
    from tribunal.jobs import JudgeBinding, fit_plan

    scores, gold, queries = halves.plan
    return fit_plan(
        scores,
        gold,
        queries.tolist(),
        epsilon=epsilon,
        delta=args.delta,
        judge=JudgeBinding(artifact_version=args.judge_version, profile=args.profile_name),
        data={"source": {"path": str(args.data)}, "sha256": "", "relevant_grade": args.relevant_at},
        created="lab",
        **{
            "method": args.method,
            "scheme": args.scheme,
            "clusters": args.clusters,
            "calibrator_kind": args.calibrator,
            "seed": 0,
            **options,
        },
    )


def _on_run(plan: Any, halves: _Halves, band: Any) -> dict[str, Any]:
    from tribunal.jobs import band_outcome

    scores, gold, _ = halves.run
    if band is None:
        return {"human_share": 1.0, "error": None, "error_ci": None, "auto": 0, "errors": 0}
    outcome = band_outcome(scores, gold, band.relevant_at, band.irrelevant_at)
    return {
        "human_share": outcome.human_share,
        "error": outcome.error,
        "error_ci": _interval(outcome.errors, outcome.auto_labelled),
        "auto": outcome.auto_labelled,
        "errors": outcome.errors,
    }


def _main_split(
    pairs: list[Any], scores: NDArray[Any], artifact: Any, args: argparse.Namespace
) -> list[dict[str, Any]]:
    from tribunal.jobs import BandOutcome, band_outcome

    halves = _Halves(pairs, scores, args.seed)
    run_scores, run_gold, run_queries = halves.run
    # The artifact's own cascade band, when the artifact is the judge.
    judge_band: BandOutcome | None = (
        band_outcome(run_scores, run_gold, artifact.band_high, artifact.band_low)
        if args.judge == "artifact"
        else None
    )
    rows = []
    for epsilon in args.epsilons:
        plan = _fit(halves, epsilon, args)
        rows.append(
            {
                "epsilon": epsilon,
                "plan": plan.model_dump(mode="json", exclude={"curve"}),
                "plan_items": int(halves.plan[1].size),
                "plan_queries": len(set(halves.plan[2].tolist())),
                "run_items": int(run_gold.size),
                "run_queries": len(set(run_queries.tolist())),
                "certified": _on_run(plan, halves, plan.band),
                "plain": _on_run(plan, halves, plan.plain_band),
                "hindsight_human_share": _hindsight(run_scores, run_gold, epsilon),
                "judge_band": None
                if judge_band is None
                else {
                    "human_share": judge_band.human_share,
                    "error": judge_band.error,
                    "error_ci": _interval(judge_band.errors, judge_band.auto_labelled),
                },
            }
        )
    return rows


_VARIANTS: tuple[dict[str, str], ...] = (
    {"scheme": "nested", "method": "ltt", "clusters": "query", "calibrator_kind": "isotonic"},
    {"scheme": "nested", "method": "ltt", "clusters": "query", "calibrator_kind": "platt"},
    {"scheme": "nested", "method": "ltt", "clusters": "none", "calibrator_kind": "isotonic"},
    {"scheme": "nested", "method": "clopper-pearson", "clusters": "none",
     "calibrator_kind": "isotonic"},
    {"scheme": "nested", "method": "sgr", "clusters": "none", "calibrator_kind": "isotonic"},
    {"scheme": "grid", "method": "ltt", "clusters": "none", "calibrator_kind": "isotonic"},
)  # fmt: skip
"""The plan's settings compared over repeated splits; the first is the default."""


def _name(variant: dict[str, str]) -> str:
    if variant["scheme"] == "grid":
        return f"certified: grid, Bonferroni, {variant['calibrator_kind']}"
    return (
        f"certified: {variant['method']}, {variant['scheme']}, clusters {variant['clusters']}, "
        f"{variant['calibrator_kind']}"
    )


def _repeated(
    pairs: list[Any], scores: NDArray[Any], args: argparse.Namespace
) -> list[dict[str, Any]]:
    from tribunal.core import InvalidArgumentError

    tallies: dict[tuple[float, str], list[tuple[bool, float]]] = {}
    plain: dict[float, list[tuple[bool, float]]] = {}
    for split in range(args.splits):
        halves = _Halves(pairs, scores, 1000 + split)
        for epsilon in args.epsilons:
            for index, variant in enumerate(_VARIANTS):
                try:
                    plan = _fit(halves, epsilon, args, **variant, seed=split)
                except InvalidArgumentError:
                    # e.g. a Platt slope <= 0 on a few calibration queries: no plan, so
                    # every item goes to humans.
                    tallies.setdefault((epsilon, _name(variant)), []).append((True, 1.0))
                    continue
                result = _on_run(plan, halves, plan.band)
                held = result["error"] is None or result["error"] <= epsilon
                tallies.setdefault((epsilon, _name(variant)), []).append(
                    (held, result["human_share"])
                )
                if index == 0:
                    result = _on_run(plan, halves, plan.plain_band)
                    held = result["error"] is None or result["error"] <= epsilon
                    plain.setdefault(epsilon, []).append((held, result["human_share"]))
    rows = []
    for (epsilon, name), outcomes in tallies.items():
        rows.append(_tally(epsilon, name, outcomes))
    for epsilon, outcomes in plain.items():
        rows.append(_tally(epsilon, "plain band (observed error <= epsilon)", outcomes))
    return sorted(rows, key=lambda r: (r["epsilon"], r["variant"]))


def _tally(epsilon: float, variant: str, outcomes: list[tuple[bool, float]]) -> dict[str, Any]:
    shares = np.array([s for _, s in outcomes])
    return {
        "epsilon": epsilon,
        "variant": variant,
        "splits": len(outcomes),
        "held": int(sum(h for h, _ in outcomes)),
        "human_share_mean": float(shares.mean()),
        "human_share_range": [float(shares.min()), float(shares.max())],
    }


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Judge {result['judge']}; plan half {result['main'][0]['plan_items']} items "
        f"({result['main'][0]['plan_queries']} queries), run half "
        f"{result['main'][0]['run_items']} items ({result['main'][0]['run_queries']} queries); "
        f"δ = {result['delta']}, {result['method']} ({result['scheme']} bands, clusters "
        f"{result['clusters']}, {result['calibrator']} calibration).",
        "",
        "| ε | certified: humans | certified: error of automatic labels [95% CI] | plan's "
        "bound | plain band: humans / error | hindsight band: humans | judge's own band: "
        "humans / error |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["main"]:
        cert, plain = row["certified"], row["plain"]
        judge = row["judge_band"] or {"human_share": None, "error": None}
        ci = cert["error_ci"]
        bound = row["plan"]["certification"]["upper_bound"]
        lines.append(
            f"| {row['epsilon']:.2f} | **{_pct(cert['human_share'])}** | "
            f"{_pct(cert['error'])}"
            + (f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "")
            + f" | {'—' if bound is None else f'{bound:.3f}'} | "
            f"{_pct(plain['human_share'])} / {_pct(plain['error'])} | "
            f"{_pct(row['hindsight_human_share'])} | "
            f"{_pct(judge['human_share'])} / {_pct(judge['error'])} |"
        )
    lines += [
        "",
        f"{result['splits']} further random query splits (plan half / run half):",
        "",
        "| ε | band | run-half error ≤ ε | humans: mean [min, max] |",
        "|---|---|---|---|",
    ]
    for row in result["repeated"]:
        low, high = row["human_share_range"]
        lines.append(
            f"| {row['epsilon']:.2f} | {row['variant']} | {row['held']}/{row['splits']} | "
            f"{_pct(row['human_share_mean'])} [{_pct(low)}, {_pct(high)}] |"
        )
    lines += ["", f"Reference: {_DREAM}."]
    return "\n".join(lines) + "\n"


def _write_halves(data: Path, pairs: list[Any], seed: int, folder: Path) -> None:
    from .._io import read_jsonl

    plan_queries, _ = split_queries(pairs, seed)
    kept = {(p.qid, p.pid) for p in pairs}
    folder.mkdir(parents=True, exist_ok=True)
    with (
        (folder / "plan-half.jsonl").open("w", encoding="utf-8") as plan_half,
        (folder / "run-half.jsonl").open("w", encoding="utf-8") as run_half,
    ):
        for row in read_jsonl(data):
            if (str(row["qid"]), str(row["pid"])) in kept:
                out = plan_half if str(row["qid"]) in plan_queries else run_half
                out.write(json.dumps(row) + "\n")


def run(args: argparse.Namespace) -> int:
    from tribunal.core import load_settings
    from tribunal.ensemble import RelevanceArtifact, relevance_artifact_path

    started = time.perf_counter()
    settings = load_settings(args.profile)
    args.data = args.data or data_root() / "trec-dl-2019" / "dl19_judged_pairs.jsonl"
    artifact = RelevanceArtifact.load(args.artifact or relevance_artifact_path(settings))
    args.judge_version, args.profile_name = artifact.version, settings.profile
    pairs = load_pairs(args.data, args.relevant_at)
    if args.per_query:
        from .relevance_judges import _subset

        pairs = _subset(pairs, args.per_query, args.seed)
    if args.judge == "gemma-cosine":
        gemma = cosines(
            pairs, "embedder_gemma", settings, query_prompt="query", document_prompt="document"
        )
        scores = (1.0 + gemma) / 2.0
        args.judge_version = "gemma-cosine"
    else:
        scores = artifact_scores(pairs, artifact, settings)
    if args.write_halves is not None:
        _write_halves(args.data, pairs, args.seed, args.write_halves)
    result = {
        "date": dt.date.today().isoformat(),
        "data": str(args.data),
        "pairs": len(pairs),
        "judge": args.judge_version,
        "delta": args.delta,
        "method": args.method,
        "scheme": args.scheme,
        "clusters": args.clusters,
        "calibrator": args.calibrator,
        "seed": args.seed,
        "splits": args.splits,
        "main": _main_split(pairs, scores, artifact, args),
        "repeated": _repeated(pairs, scores, args) if args.splits else [],
    }
    result["seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    table = _markdown(result)
    args.out.with_suffix(".md").write_text(table, encoding="utf-8")
    print(table)
    print(f"-> {args.out} and {args.out.with_suffix('.md')} ({result['seconds']} s)")
    return 0
