"""How well must a relevance judge rank for the labelling cascade to reach its target?

Target: balanced accuracy >= 0.80 on the items the cascade keeps, escalating <= 15%.
A judge's scores are modelled as binormal with equal variances (negatives N(0, 1),
positives N(d, 1), so AUROC = Phi(d / sqrt 2)) at TREC DL test's prevalence (61 of 150
relevant). For each AUROC the best cascade is searched on a large sample: a threshold
and an escalation band around it holding at most 15% of the items, maximising the
balanced accuracy of the rest. This is the ceiling a perfectly chosen threshold and band
reach; the sweep's, chosen on 150 selection items, reaches less.

``--task matching`` asks the same of the matching target (accuracy >= 0.90 with
hallucination = wrong / accepted <= 0.05, accepting at one threshold) at the matching
test half's prevalence (153 of 332 match): the best accuracy among thresholds whose
hallucination is at most 0.05.

    .venv/bin/python lab/experiments/cascade_ceiling.py
    .venv/bin/python lab/experiments/cascade_ceiling.py --task matching
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np
from scipy.stats import norm


def best_kept_bacc(
    scores: np.ndarray, labels: np.ndarray, max_escalation: float, grid: int = 601
) -> tuple[float, float]:
    """Best (kept balanced accuracy, escalated share) over thresholds and bands.

    The band is a run of items by score rank: ``width`` items starting at ``start``; the
    threshold splits it (items above the band relevant, below irrelevant). Candidate
    starts and widths are a grid of score quantiles.
    """
    order = np.argsort(scores)
    y = labels[order]
    n = y.size
    positives_below = np.concatenate([[0], np.cumsum(y)])  # positives among the lowest k
    total_pos = int(y.sum())
    best = (0.0, 0.0)
    widths = np.unique(np.linspace(0, int(max_escalation * n), 16).astype(int))
    for start in np.linspace(0, n, grid).astype(int):
        for width in widths:
            stop = min(n, start + width)
            # Kept below the band: called irrelevant; kept above: called relevant.
            fn = positives_below[start]
            tn = start - fn
            tp = total_pos - positives_below[stop]
            fp = (n - stop) - tp
            kept_pos = fn + tp
            kept_neg = tn + fp
            if kept_pos == 0 or kept_neg == 0:
                continue
            bacc = 0.5 * (tp / kept_pos + tn / kept_neg)
            if bacc > best[0]:
                best = (bacc, (stop - start) / n)
    return best


def best_bounded_accuracy(
    scores: np.ndarray, labels: np.ndarray, max_hallucination: float
) -> tuple[float, float]:
    """Best (accuracy, coverage) of "accept if score >= t" with wrong/accepted <= bound."""
    y = labels[np.argsort(-scores)]
    accepted = np.arange(1, y.size + 1)
    right = np.cumsum(y)  # matches among the k highest
    hallucination = (accepted - right) / accepted
    # Accept the top k: right ones plus the non-matches left below the cut.
    accuracy = (right + (y.size - y.sum()) - (accepted - right)) / y.size
    ok = hallucination <= max_hallucination
    if not ok.any():
        return float(1 - y.mean()), 0.0  # accept nothing
    k = int(np.argmax(np.where(ok, accuracy, -1.0)))
    return float(accuracy[k]), float(accepted[k] / y.size)


def _binormal(rng: np.random.Generator, items: int, prevalence: float) -> tuple[Any, Any]:
    labels = (rng.random(items) < prevalence).astype(np.int64)
    return labels, rng.standard_normal(items)


def _matching(args: argparse.Namespace) -> None:
    labels, noise = _binormal(np.random.default_rng(args.seed), args.items, 153 / 332)
    print(f"binormal matcher, prevalence {153 / 332:.3f}, hallucination <= 0.05")
    print("| AUROC | max accuracy | best accuracy, hallucination <= 0.05 | coverage |")
    print("|---|---|---|---|")
    for target in (0.85, 0.90, 0.904, 0.93, 0.95, 0.96, 0.97, 0.975, 0.98):
        scores = noise + np.sqrt(2) * norm.ppf(target) * labels
        best, _ = best_bounded_accuracy(scores, labels, 1.0)
        bounded, coverage = best_bounded_accuracy(scores, labels, 0.05)
        print(f"| {target:.3f} | {best:.3f} | {bounded:.3f} | {coverage:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=200_000, help="simulated items")
    parser.add_argument("--prevalence", type=float, default=61 / 150)
    parser.add_argument("--max-escalation", type=float, default=0.15)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--task", choices=("relevance", "matching"), default="relevance")
    args = parser.parse_args()
    if args.task == "matching":
        _matching(args)
        return
    labels, noise = _binormal(np.random.default_rng(args.seed), args.items, args.prevalence)
    share = f"<= {args.max_escalation:.0%} escalated"
    print(f"binormal judge, prevalence {args.prevalence:.3f}, {share}")
    print("| AUROC | bAcc, no band | best kept bAcc | escalated |\n|---|---|---|---|")
    for target in (0.70, 0.72, 0.75, 0.78, 0.80, 0.82, 0.84, 0.845, 0.85, 0.88, 0.90, 0.93):
        d = np.sqrt(2) * norm.ppf(target)
        scores = noise + d * labels
        plain, _ = best_kept_bacc(scores, labels, 0.0)
        kept, escalated = best_kept_bacc(scores, labels, args.max_escalation)
        print(f"| {target:.3f} | {plain:.3f} | {kept:.3f} | {escalated:.3f} |")


if __name__ == "__main__":
    main()
