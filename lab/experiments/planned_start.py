"""Where a calibration's risk-control scan started, and what each part saw there.

`tribunal calibrate` plans its fixed-sequence scan on the calibrator's fit queries (the
plan): a grid of thresholds and the start the plan predicts will certify the most
coverage (`tribunal.confidence._risk_plan`). When an α is not certified, the question is
whether the plan misjudged the rate (a bias) or the certify part drew one error too many
(chance). This replays one calibration split from recorded signals and prints, at the
plan's grid points, the plan's coverage and errors and its predicted chance that the
certify part passes there, beside what the certify part and a test split (read by
nothing) actually hold — the start marked.

    PYTHONPATH=services:lab .venv/bin/python lab/experiments/planned_start.py \\
        --work .build/eval/vote-1200/banking77/work/taught --alpha 0.05
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from tribunal.commands._calibration_signals import read_signals
from tribunal.confidence import CalibrationConfig, binomial_p_value, read_traffic
from tribunal.confidence._calibrate import _candidate_rows, decisions
from tribunal.confidence._kinds import make_calibrator
from tribunal.confidence._risk_plan import (
    Labelled,
    max_errors_passing,
    pass_chances,
    plan_grid,
    plan_start,
)
from tribunal.confidence._traffic import split_traffic


def _at(confidence: NDArray[np.float64], right: NDArray[np.int64], threshold: float) -> str:
    accepted = confidence >= threshold
    wrong = int((accepted & (right == 0)).sum())
    return f"{accepted.mean():.2f}, {wrong} / {int(accepted.sum())}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", type=Path, required=True, help="a `eval coverage` work folder")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--delta", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0, help="the calibration split's seed")
    parser.add_argument("--holdout-fraction", type=float, default=0.1)
    args = parser.parse_args()
    traffic = read_traffic(args.work / "calibration.jsonl")
    observed, _ = read_signals(args.work / "traffic-signals.jsonl", traffic)
    test = read_traffic(args.work / "test.jsonl")
    test_observed = read_signals(args.work / "test-signals.jsonl", test)[0]
    config = CalibrationConfig(seed=args.seed, holdout_fraction=args.holdout_fraction)
    split = split_traffic(
        traffic.queries,
        holdout_fraction=config.holdout_fraction,
        fit_fraction=config.fit_fraction,
        seed=config.seed,
    )
    calibrator = make_calibrator(config.calibrator, score=config.score, signals=config.signals)
    calibrator.fit(*_candidate_rows(traffic, observed, split.fit))
    plan_conf, plan_right, _ = decisions(calibrator, traffic, observed, split.fit)
    cert_conf, cert_right, _ = decisions(calibrator, traffic, observed, split.risk)
    test_conf, test_right, _ = decisions(calibrator, test, test_observed, np.arange(len(test)))
    plan = Labelled.of(plan_conf, plan_right)
    grid = plan_grid(plan)
    kwargs = {"alpha": args.alpha, "delta": args.delta, "test": binomial_p_value}
    coverage, chance = pass_chances(plan, grid, cert_conf.size, **kwargs)
    start = plan_start(plan, grid, cert_conf.size, **kwargs)
    print(
        f"plan {plan.n} queries, certify {cert_conf.size}, test {test_conf.size}; "
        f"alpha {args.alpha:g}, delta {args.delta:g}; start: grid point {start}\n"
    )
    print(
        "| threshold | plan: coverage / wrong of accepted | predicted chance the certify "
        "part passes | most wrong that pass there | certify: coverage / wrong of accepted | "
        "test: coverage / wrong of accepted |"
    )
    print("|---|---|---|---|---|---|")
    for index, threshold in enumerate(grid):
        if coverage[index] > 0.85:
            break
        expected = round(coverage[index] * cert_conf.size)
        allowed = max_errors_passing(expected, args.alpha, args.delta, binomial_p_value)
        mark = "**start** " if index == start else ""
        print(
            f"| {mark}{threshold:.4f} | {_at(plan_conf, plan_right, threshold)} | "
            f"{chance[index]:.2f} | {allowed if allowed >= 0 else '–'} of {expected} | "
            f"{_at(cert_conf, cert_right, threshold)} | {_at(test_conf, test_right, threshold)} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
