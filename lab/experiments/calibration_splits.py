"""How a certified threshold fares over many grouped splits of the same labelled traffic.

`tribunal calibrate` certifies on one split (seed 0). With a few hundred queries, which
queries land in the certify part decides whether a low α can be certified at all, so
this repeats the calibration for seeds 0 … N−1 from signals recorded once
(`tribunal calibrate --signals-out`) and reports, per α: in how many splits a threshold
was certified, the coverage, and the held-out hallucination rate (per split and pooled
over splits: wrong / answered summed over the held-out parts).

    .venv/bin/python lab/experiments/calibration_splits.py \\
        --traffic .build/calibrate/covid-traffic.jsonl \\
        --signals .build/calibrate/covid-faq-signals.jsonl --seeds 20 --method ltt
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.confidence import (
    CalibrationBinding,
    CalibrationConfig,
    ObservedCandidate,
    Signals,
    calibrate,
    read_traffic,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traffic", type=Path, required=True)
    parser.add_argument("--signals", type=Path, required=True, help="from --signals-out")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--method", default="ltt")
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--out", type=Path, default=None, help="JSON summary")
    args = parser.parse_args()
    traffic = read_traffic(args.traffic)
    lines = [json.loads(line) for line in args.signals.read_text().splitlines() if line]
    binding = CalibrationBinding.from_dict(lines[0]["binding"])
    observed = [
        [
            ObservedCandidate(c["entry_id"], Signals.from_mapping(c["signals"]))
            for c in row["candidates"]
        ]
        for row in lines[1:]
    ]
    per_alpha: dict[float, list[dict[str, Any]]] = {a: [] for a in args.alpha}
    for seed in range(args.seeds):
        config = CalibrationConfig(
            alphas=tuple(args.alpha), delta=args.delta, method=args.method, seed=seed
        )
        report = calibrate(traffic, observed, config, binding).report
        for item in report["per_alpha"]:
            per_alpha[item["alpha"]].append({"seed": seed, **item})
    summary: dict[str, Any] = {"method": args.method, "seeds": args.seeds, "alphas": {}}
    for alpha, rows in per_alpha.items():
        certified = [r for r in rows if r["threshold"] is not None]
        answered = sum(r["heldout"]["accepted"] for r in certified)
        wrong = sum(r["heldout"]["errors"] for r in certified)
        rates = [r["heldout"]["hallucination_rate"] for r in certified if r["heldout"]["accepted"]]
        summary["alphas"][str(alpha)] = {
            "certified": len(certified),
            "certify_coverage_mean": float(np.mean([r["coverage"] for r in certified]))
            if certified
            else None,
            "heldout_coverage_mean": float(np.mean([r["heldout"]["coverage"] for r in certified]))
            if certified
            else None,
            "heldout_hallucination_mean": float(np.mean(rates)) if rates else None,
            "heldout_above_alpha": sum(1 for rate in rates if rate > alpha),
            "heldout_pooled": [wrong, answered],
        }
        line = f"alpha {alpha:g}: certified in {len(certified)}/{args.seeds} splits"
        if certified:
            item = summary["alphas"][str(alpha)]
            line += (
                f"; coverage {item['certify_coverage_mean']:.3f} (certify) / "
                f"{item['heldout_coverage_mean']:.3f} (held-out); held-out hallucination "
                f"mean {item['heldout_hallucination_mean']:.3f}, above alpha in "
                f"{item['heldout_above_alpha']}/{len(rates)} splits, pooled {wrong}/{answered}"
                f" = {wrong / max(answered, 1):.3f}"
            )
        print(line)
    if args.out is not None:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
