"""How many labelled queries would certify each α a calibrator does not, for any artifact.

Scores the traffic's recorded signals (`tribunal calibrate --signals-out`) with the
artifact's own calibrator, replays its split, checks that the certify decisions at each
certified threshold are those the artifact recorded, and prints the estimate
(`tribunal.confidence.queries_to_certify`) per α it does not certify. It serves
artifacts calibrated before the certify curve was recorded in them:

    .venv/bin/python lab/experiments/certify_estimate.py \\
        --artifact ARTIFACT.json --traffic .build/calibrate/covid-traffic.jsonl \\
        --signals .build/calibrate/covid-signals.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tribunal.commands._calibration_signals import read_signals
from tribunal.confidence import (
    CalibratorArtifact,
    certify_curve,
    not_certified_message,
    queries_to_certify,
    read_traffic,
)
from tribunal.confidence._calibrate import decisions
from tribunal.confidence._traffic import split_traffic
from tribunal_lab.evaluation._split_units import by_answer_set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--artifact", type=Path, required=True)
    parser.add_argument("--traffic", type=Path, required=True)
    parser.add_argument("--signals", type=Path, required=True)
    args = parser.parse_args()
    artifact = CalibratorArtifact.load(args.artifact)
    traffic = read_traffic(args.traffic)
    if traffic.sha256 != artifact.training_data.get("sha256"):
        raise SystemExit(f"{args.traffic} is not the traffic {artifact.version} was fitted on")
    observed, _ = read_signals(args.signals, traffic)
    config = artifact.config
    if "split_unit" not in config:  # certified before calibration split by query
        traffic = by_answer_set(traffic)
    split = split_traffic(
        traffic.queries,
        holdout_fraction=config["holdout_fraction"],
        fit_fraction=config["fit_fraction"],
        seed=config["seed"],
    )
    confidence, right, _ = decisions(artifact.calibrator, traffic, observed, split.risk)
    for threshold in artifact.thresholds:
        if threshold.threshold is None:
            continue
        taken = confidence >= threshold.threshold
        found = (int(taken.sum()), int((taken & (right == 0)).sum()))
        recorded = (threshold.accepted, threshold.errors)
        print(f"alpha={threshold.alpha:g}: certify decisions {found}, recorded {recorded}")
        if found != recorded:
            raise SystemExit("the signals do not reproduce the artifact's certify decisions")
    curve = certify_curve(confidence, right)
    for threshold in artifact.thresholds:
        if threshold.threshold is not None:
            continue
        estimate = queries_to_certify(
            curve["accepted"],
            curve["errors"],
            certify_queries=int(split.risk.size),
            labelled_queries=len(traffic),
            alpha=threshold.alpha,
            delta=threshold.delta,
            method=threshold.method,
        )
        print(not_certified_message(threshold.alpha, len(traffic), estimate))


if __name__ == "__main__":
    main()
