"""Repeated human samples through the product's estimator: coverage, width, signs, τ."""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import stats

__all__ = ["simulate", "write_outputs"]


def _tau(a: dict[str, float], b: dict[str, float]) -> float:
    names = sorted(a)
    value = stats.kendalltau([a[n] for n in names], [b[n] for n in names]).statistic
    return float(value) if np.isfinite(value) else 0.0


def simulate(
    pool: Any,
    base: Any,
    grades: NDArray[np.int64],
    truth: dict[tuple[str, str], float],
    args: argparse.Namespace,
) -> dict[str, Any]:
    from tribunal.jobs._ppi import estimate_metrics
    from tribunal.jobs._ppi_pool import METRICS
    from tribunal.jobs._ppi_sample import draw_sample

    runs = sorted(pool.ranks)
    metrics = [spec.name for spec in METRICS]
    rows: list[dict[str, Any]] = []
    human_only: dict[tuple[float, int], Any] = {}
    designs = sorted(args.designs, key=lambda d: d != "uniform")  # uniform first
    for budget in args.budgets:
        n = max(2, round(budget * pool.size))
        for design in designs:
            started = time.perf_counter()
            tally: dict[str, Any] = defaultdict(list)
            for seed in range(args.samples):
                sample, _ = draw_sample(pool, base, n, design=design, seed=seed)
                labels = dataclasses.replace(base, human=np.where(sample.drawn, grades, -1))
                est = estimate_metrics(
                    pool, labels, sample, alpha=args.alpha, human_only=design == "uniform"
                )
                if design == "uniform":
                    human_only[(budget, seed)] = est.human_only
                    _ppi_python_p10(pool, base, grades, sample, truth=truth, args=args, tally=tally)
                _tally(tally, est, human_only.get((budget, seed)), runs, truth)
                if (seed + 1) % 20 == 0:
                    rate = (seed + 1) / (time.perf_counter() - started)
                    left = (args.samples - seed - 1) / rate
                    print(
                        f"  budget {budget:.0%} {design}: {seed + 1}/{args.samples} samples "
                        f"({rate:.1f}/s, ETA {left:.0f} s)",
                        flush=True,
                    )
            for metric in metrics:
                rows.append(
                    _row(
                        tally,
                        metric,
                        budget=budget,
                        n=n,
                        design=design,
                        judge_only=est.judge_only,
                        runs=runs,
                        truth=truth,
                    )
                )
    return {"rows": rows}


def _tally(
    tally: dict[str, Any],
    est: Any,
    uniform: Any,
    runs: list[str],
    truth: dict[tuple[str, str], float],
) -> None:
    """One sample's coverage, widths, pairwise signs and Kendall τ, added to ``tally``."""
    for metric in sorted({name for _, name in est.ppi}):
        for run in runs:
            key = (run, metric)
            e = est.ppi[key]
            tally[f"{metric} cover"].append(e.low <= truth[key] <= e.high)
            tally[f"{metric} width"].append(e.high - e.low)
            tally[f"{metric} error"].append(e.value - truth[key])
            if key in est.human_equivalent:
                tally[f"{metric} equivalent"].append(est.human_equivalent[key])
            if uniform is not None:
                h = uniform[key]
                tally[f"{metric} human width"].append(h.high - h.low)
                tally[f"{metric} human cover"].append(h.low <= truth[key] <= h.high)
        for a_index, a in enumerate(runs):
            for b in runs[a_index + 1 :]:
                d = est.differences[(metric, a, b)]
                true = truth[(a, metric)] - truth[(b, metric)]
                excludes = d.low > 0 or d.high < 0
                tally[f"{metric} excludes"].append(excludes)
                if excludes:
                    tally[f"{metric} sign right"].append(np.sign(d.value) == np.sign(true))
                tally[f"{metric} diff cover"].append(d.low <= true <= d.high)
        true_scores = {run: truth[(run, metric)] for run in runs}
        tally[f"{metric} tau"].append(
            _tau({run: est.ppi[(run, metric)].value for run in runs}, true_scores)
        )
        tally[f"{metric} judge tau"].append(
            _tau({run: est.judge_only[(run, metric)] for run in runs}, true_scores)
        )
        if uniform is not None:
            tally[f"{metric} human tau"].append(
                _tau({run: uniform[(run, metric)].value for run in runs}, true_scores)
            )


def _ppi_python_p10(
    pool: Any,
    base: Any,
    grades: NDArray[np.int64],
    sample: Any,
    *,
    truth: dict[tuple[str, str], float],
    args: argparse.Namespace,
    tally: dict[str, Any],
) -> None:
    """P@10 by ``ppi_py.ppi_mean_ci`` (PPI++, power-tuned) where the package fits as is:
    a run's P@10 is the mean relevance of its 10 × Q top slots, and a uniform sample of
    the pool samples those slots uniformly."""
    from ppi_py import ppi_mean_ci

    relevant = (grades >= args.relevant_at).astype(np.float64)
    for run, rank in pool.ranks.items():
        slots = (rank >= 1) & (rank <= 10)
        labelled = slots & sample.drawn
        if labelled.sum() < 2:
            continue
        low, high = ppi_mean_ci(
            relevant[labelled], base.judge_p[labelled], base.judge_p[slots], alpha=args.alpha
        )
        low, high = float(np.ravel(low)[0]), float(np.ravel(high)[0])
        tally["P@10 ppi_py cover"].append(low <= truth[(run, "P@10")] <= high)
        tally["P@10 ppi_py width"].append(high - low)


def _mean(values: list[Any]) -> float | None:
    return round(float(np.mean(values)), 4) if values else None


def _row(
    tally: dict[str, Any],
    metric: str,
    *,
    budget: float,
    n: int,
    design: str,
    judge_only: dict[tuple[str, str], float],
    runs: list[str],
    truth: dict[tuple[str, str], float],
) -> dict[str, Any]:
    cover = np.array(tally[f"{metric} cover"]).reshape(-1, len(runs))
    error = np.array(tally[f"{metric} error"]).reshape(-1, len(runs))
    return {
        "budget": budget,
        "human_labels": n,
        "design": design,
        "metric": metric,
        "coverage": _mean(tally[f"{metric} cover"]),
        "coverage_by_run": {
            run: round(float(c), 3) for run, c in zip(runs, cover.mean(0), strict=True)
        },
        # The estimate's mean error per run (its bias over the samples).
        "mean_error_by_run": {
            run: round(float(e), 4) for run, e in zip(runs, error.mean(0), strict=True)
        },
        "width": _mean(tally[f"{metric} width"]),
        "human_only_width": _mean(tally[f"{metric} human width"]),
        "human_only_coverage": _mean(tally[f"{metric} human cover"]),
        "human_labels_for_same_width": _mean(tally[f"{metric} equivalent"]),
        "differences_excluding_0": _mean(tally[f"{metric} excludes"]),
        "sign_right_when_excluding_0": _mean(tally[f"{metric} sign right"]),
        "difference_coverage": _mean(tally[f"{metric} diff cover"]),
        "kendall_tau": _mean(tally[f"{metric} tau"]),
        "kendall_tau_judge_only": _mean(tally[f"{metric} judge tau"]),
        "kendall_tau_human_only": _mean(tally[f"{metric} human tau"]),
        "ppi_python_coverage": _mean(tally[f"{metric} ppi_py cover"]),
        "ppi_python_width": _mean(tally[f"{metric} ppi_py width"]),
        "judge_only_error": round(
            float(np.mean([abs(judge_only[(r, metric)] - truth[(r, metric)]) for r in runs])), 4
        ),
    }


def _markdown(report: dict[str, Any]) -> str:
    def pct(value: float | None) -> str:
        return "–" if value is None else f"{value:.1%}"

    def num(value: float | None, digits: int = 3) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    lines = [
        f"`{report['command']}` · {report['date']} · pool {report['pool']['pairs']} pairs, "
        f"{report['pool']['queries']} queries, runs {', '.join(report['pool']['runs'])}; "
        f"judge {report['judge']['artifact']}; nominal coverage {1 - report['alpha']:.0%}",
        "",
        "| budget | design | metric | coverage (min over runs) | width | humans-only width "
        "(uniform) | humans-only coverage | human labels for the same width | differences "
        "excluding 0 | sign right then | differences' coverage | Kendall τ: judge+humans / judge "
        "only / humans only |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report["rows"]:
        low = min(row["coverage_by_run"].values())
        lines.append(
            f"| {row['budget']:.0%} ({row['human_labels']}) | {row['design']} | {row['metric']} "
            f"| {pct(row['coverage'])} ({pct(low)}) | {num(row['width'])} | "
            f"{num(row['human_only_width'])} | {pct(row['human_only_coverage'])} | "
            f"{num(row['human_labels_for_same_width'], 0)} | "
            f"{pct(row['differences_excluding_0'])} | {pct(row['sign_right_when_excluding_0'])} | "
            f"{pct(row['difference_coverage'])} | {num(row['kendall_tau'])} / "
            f"{num(row['kendall_tau_judge_only'])} / "
            f"{num(row['kendall_tau_human_only'])} |"
        )
    lines += [
        "",
        "P@10 by `ppi_py.ppi_mean_ci` (PPI++ as packaged; a run's top-10 slots as the "
        "population, uniform design):",
        "",
        "| budget | coverage | width |",
        "|---|---|---|",
    ]
    for row in report["rows"]:
        if row["ppi_python_coverage"] is not None:
            lines.append(
                f"| {row['budget']:.0%} | {pct(row['ppi_python_coverage'])} | "
                f"{num(row['ppi_python_width'])} |"
            )
    return "\n".join(lines) + "\n"


def write_outputs(report: dict[str, Any], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    markdown = _markdown(report)
    out.with_suffix(".md").write_text(markdown, encoding="utf-8")
    _plot(report, out.with_suffix(".png"))
    print(markdown, end="")
    print(f"wrote {out}, {out.with_suffix('.md')}, {out.with_suffix('.png')}")


def _plot(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = report["rows"]
    labels = [f"{r['metric']}\n{r['budget']:.0%} {r['design'][:5]}" for r in rows]
    x = np.arange(len(rows))
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.2), dpi=120)
    left.bar(x, [r["coverage"] for r in rows], color="C0", label="judge + humans")
    left.plot(
        x,
        [r["human_only_coverage"] or np.nan for r in rows],
        "s",
        color="C2",
        label="humans only (uniform)",
    )
    left.axhline(1 - report["alpha"], color="k", linestyle="--", linewidth=1, label="nominal")
    left.set_ylim(0.5, 1.0)
    left.set_ylabel("coverage of the true metric")
    left.set_xticks(x, labels, fontsize=7)
    left.legend(fontsize=8, loc="lower right")
    right.bar(x - 0.2, [r["width"] for r in rows], width=0.4, color="C0", label="judge + humans")
    right.bar(
        x + 0.2,
        [r["human_only_width"] or 0 for r in rows],
        width=0.4,
        color="C2",
        label="humans only, same budget",
    )
    right.set_ylabel("mean interval width")
    right.set_xticks(x, labels, fontsize=7)
    right.legend(fontsize=8)
    figure.suptitle(f"TREC DL 2019, {report['pool']['pairs']} pooled pairs", fontsize=10)
    figure.tight_layout()
    figure.savefig(path)
    plt.close(figure)
