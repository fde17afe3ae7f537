"""How a certified threshold fares over many splits of the same labelled traffic.

`tribunal calibrate` certifies on one split (seed 0). With a few hundred queries, which
queries land in the certify part decides whether a low α can be certified at all, so
this repeats the calibration for seeds 0 … N−1 from signals recorded once
(`tribunal calibrate --signals-out`, or the `work/` folder of `tribunal-lab eval
coverage`) and reports, per α: in how many splits a threshold was certified, the
coverage, and the held-out hallucination rate (per split and pooled over splits: wrong /
answered summed over the held-out parts); with `--test`, also what each certified
threshold does on a test split no calibration read.

`--signal` replays the calibrator on other columns (one left out, say). Two design
choices can be replayed against the product's: `--unit answers` splits by
answer set (all queries with the same answers on one side, as calibration did before it
split by query), and `--drop-fit-only` leaves out rows marked `fit_only` (a tune's head
part), so the calibrator is fitted on part of the certifiable queries instead.

    .venv/bin/python lab/experiments/calibration_splits.py \\
        --traffic .build/calibrate/covid-traffic.jsonl \\
        --signals .build/calibrate/covid-signals.jsonl --seeds 20 --method clopper-pearson
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.commands._calibration_signals import read_signals
from tribunal.confidence import (
    CalibrationConfig,
    Traffic,
    calibrate,
    read_traffic,
)
from tribunal.confidence._calibrate import decisions
from tribunal.confidence._threshold import acceptance_outcome
from tribunal_lab.evaluation._split_units import by_answer_set


def _variant(traffic: Traffic, observed: list[Any], args: argparse.Namespace) -> tuple[Any, Any]:
    if args.drop_fit_only:
        keep = [i for i, q in enumerate(traffic.queries) if not q.fit_only]
        traffic = replace(traffic, queries=tuple(traffic.queries[i] for i in keep))
        observed = [observed[i] for i in keep]
    if args.unit == "answers":
        traffic = by_answer_set(traffic)
    return traffic, observed


def _on_test(
    result: Any, test: Traffic, test_observed: list[Any]
) -> tuple[dict[float, tuple[int, int]], float]:
    """Per α certified: (answered, wrong) on the test split; and how well the served
    confidence ranks the test queries' decisions (AUROC, right above wrong)."""
    from sklearn.metrics import roc_auc_score

    rows = np.arange(len(test), dtype=np.int64)
    confidence, right, _ = decisions(result.artifact.calibrator, test, test_observed, rows)
    out = {}
    for threshold in result.artifact.thresholds:
        if threshold.threshold is not None:
            outcome = acceptance_outcome(confidence, right, threshold.threshold)
            out[threshold.alpha] = (outcome.accepted, outcome.errors)
    return out, float(roc_auc_score(right, confidence))


def _summarise(
    alpha: float, rows: list[dict[str, Any]], test: Traffic | None, seeds: int
) -> dict[str, Any]:
    """One α over every split: printed, and returned for the JSON summary."""
    certified = [r for r in rows if r["threshold"] is not None]
    answered = sum(r["heldout"]["accepted"] for r in certified)
    wrong = sum(r["heldout"]["errors"] for r in certified)
    rates = [r["heldout"]["hallucination_rate"] for r in certified if r["heldout"]["accepted"]]
    item: dict[str, Any] = {
        "certified": len(certified),
        "certify_coverage_mean": float(np.mean([r["coverage"] for r in certified]))
        if certified
        else None,
        "heldout_hallucination_mean": float(np.mean(rates)) if rates else None,
        "heldout_above_alpha": sum(1 for rate in rates if rate > alpha),
        "heldout_pooled": [wrong, answered],
    }
    line = f"alpha {alpha:g}: certified in {len(certified)}/{seeds} splits"
    if certified:
        line += f"; certify-part coverage {item['certify_coverage_mean']:.3f}"
    if test is not None:
        # A split that certifies nothing answers nothing: 0 in the mean.
        shares = [r["test"][0] / len(test) if r["test"] else 0.0 for r in rows]
        tested = [r["test"] for r in rows if r["test"] and r["test"][0]]
        test_rates = [t[1] / t[0] for t in tested]
        item["test_answered_mean"] = float(np.mean(shares))
        item["test_answered_at_least_half"] = sum(1 for s in shares if s >= 0.5)
        item["test_answered_at_least_0.7"] = sum(1 for s in shares if s >= 0.7)
        item["test_hallucination_mean"] = float(np.mean(test_rates)) if test_rates else None
        item["test_above_alpha"] = sum(1 for rate in test_rates if rate > alpha)
        line += f"; test answered {item['test_answered_mean']:.3f} (mean over all splits)"
        if test_rates:
            line += (
                f", realized {item['test_hallucination_mean']:.3f} (mean), above alpha in "
                f"{item['test_above_alpha']}/{len(test_rates)}"
            )
    elif rates:
        line += (
            f"; held-out hallucination mean {item['heldout_hallucination_mean']:.3f}, "
            f"above alpha in {item['heldout_above_alpha']}/{len(rates)} splits, pooled "
            f"{wrong}/{answered} = {wrong / max(answered, 1):.3f}"
        )
    print(line)
    return item


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traffic", type=Path, required=True)
    parser.add_argument("--signals", type=Path, required=True, help="from --signals-out")
    parser.add_argument("--test", type=Path, default=None, help="a test split's traffic")
    parser.add_argument("--test-signals", type=Path, default=None)
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--method", default="clopper-pearson")
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--holdout-fraction", type=float, default=0.3)
    parser.add_argument("--unit", choices=("query", "answers"), default="query")
    parser.add_argument("--drop-fit-only", action="store_true")
    parser.add_argument(
        "--signal",
        nargs="+",
        default=None,
        help="columns of the monotone calibrator (default: the product's), e.g. to leave one out",
    )
    parser.add_argument("--out", type=Path, default=None, help="JSON summary")
    args = parser.parse_args()
    traffic = read_traffic(args.traffic)
    observed, binding = read_signals(args.signals, traffic)
    traffic, observed = _variant(traffic, observed, args)
    test = read_traffic(args.test) if args.test else None
    test_observed = read_signals(args.test_signals, test)[0] if test is not None else []
    per_alpha: dict[float, list[dict[str, Any]]] = {a: [] for a in args.alpha}
    test_auroc: list[float] = []
    for seed in range(args.seeds):
        config = CalibrationConfig(
            alphas=tuple(args.alpha),
            delta=args.delta,
            method=args.method,
            seed=seed,
            holdout_fraction=args.holdout_fraction,
            signals=tuple(args.signal) if args.signal else None,
        )
        result = calibrate(traffic, observed, config, binding)
        tested: dict[float, tuple[int, int]] = {}
        if test is not None:
            tested, auroc = _on_test(result, test, test_observed)
            test_auroc.append(auroc)
        for item in result.report["per_alpha"]:
            per_alpha[item["alpha"]].append(
                {"seed": seed, **item, "test": tested.get(item["alpha"])}
            )
    summary: dict[str, Any] = {
        "method": args.method,
        "seeds": args.seeds,
        "unit": args.unit,
        "drop_fit_only": args.drop_fit_only,
        "signals": args.signal,
        "alphas": {},
    }
    for alpha, rows in per_alpha.items():
        summary["alphas"][str(alpha)] = _summarise(alpha, rows, test, args.seeds)
    if test_auroc:
        summary["test_auroc"] = {"first_split": test_auroc[0], "mean": float(np.mean(test_auroc))}
        print(
            f"served confidence on the test split: AUROC {test_auroc[0]:.3f} (split 0), "
            f"{np.mean(test_auroc):.3f} (mean)"
        )
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
