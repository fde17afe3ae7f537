"""Which calibrator for the feature matcher's signals, chosen without the held-out rows.

``tribunal confidence fit`` splits labelled signals into fit / risk / held-out parts.
This picks the calibrator design on the calibration rows only (fit ∪ risk): 5-fold
stratified cross-validation of each candidate's log-loss and Brier score, so the
held-out figures of the chosen one stay unselected. Candidates: Platt on every signal
(P(match) + the retrieval scores, with missing-value columns for the never-retrieved
STS-B pairs), Platt on P(match) alone, isotonic and temperature on P(match).

    .venv/bin/python lab/experiments/calibrator_choice.py --data .build/eval/matching-signals.jsonl
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from sklearn.metrics import brier_score_loss, log_loss, roc_auc_score
from sklearn.model_selection import StratifiedKFold
from tribunal.confidence import Signals, make_calibrator, read_labelled_signals, split_rows

_CANDIDATES = {
    "platt, every signal": ("platt", None, False),
    "platt, P(match) only": ("platt", None, True),
    "isotonic on P(match)": ("isotonic", "ensemble_p_match", False),
    "temperature on P(match)": ("temperature", "ensemble_p_match", False),
}


def _p_match_only(signals: Signals) -> Signals:
    return Signals(ensemble_p_match=signals.ensemble_p_match)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="labelled signals (JSONL)")
    parser.add_argument("--holdout-fraction", type=float, default=0.3)
    parser.add_argument("--risk-fraction", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=0, help="the split seed `fit` uses")
    args = parser.parse_args()

    data = read_labelled_signals(args.data)
    split = split_rows(
        data.labels,
        holdout_fraction=args.holdout_fraction,
        risk_fraction=args.risk_fraction,
        seed=args.seed,
    )
    rows = np.sort(np.concatenate([split.fit, split.risk]))  # never the held-out rows
    y = data.labels[rows]
    print(f"calibration rows: {rows.size} ({int(y.sum())} correct); held-out rows unused")
    print("| calibrator | CV log-loss | CV Brier | CV AUROC |\n|---|---|---|---|")
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=args.seed)
    for name, (kind, score, only_p) in _CANDIDATES.items():
        signals = [data.signals[i] for i in rows]
        if only_p:
            signals = [_p_match_only(s) for s in signals]
        predicted = np.zeros(rows.size)
        for train, test in folds.split(np.zeros(rows.size), y):
            calibrator = make_calibrator(kind, score=score)
            calibrator.fit([signals[i] for i in train], y[train])
            predicted[test] = calibrator.predict([signals[i] for i in test])
        clipped = np.clip(predicted, 1e-6, 1 - 1e-6)
        print(
            f"| {name} | {log_loss(y, clipped):.3f} | {brier_score_loss(y, predicted):.3f} "
            f"| {roc_auc_score(y, predicted):.3f} |"
        )


if __name__ == "__main__":
    main()
