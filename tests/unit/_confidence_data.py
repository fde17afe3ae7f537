"""Seeded synthetic labelled signals for the confidence tests (a known generative process)."""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from tribunal.confidence import CalibrationBinding, DebateOutcome, LabelledSignals, Signals

# A 40-entry FAQ collection with a feature matcher: what a certificate is bound to.
BINDING = CalibrationBinding(
    collection="faq",
    collection_version="kb-0123456789abcdef",
    entries=40,
    matcher="features:mf-aaaaaaaaaaaa",
    embedder="all-minilm-l6-v2@53aa51172d14",
    profile="tiny",
    candidates=2,
)


def synthetic_signals(n: int = 400, seed: int = 0) -> tuple[list[Signals], NDArray[np.int64]]:
    """Correct candidates (label 1) score higher on every signal, with noise; the entailment
    check is missing on ~30 % of rows and the debate ran on ~20 %."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n).astype(np.int64)
    quality = np.where(labels == 1, rng.beta(5, 2, n), rng.beta(2, 5, n))

    def noisy(scale: float) -> NDArray[np.float64]:
        return np.clip(quality + rng.normal(0, scale, n), 0.0, 1.0)

    judge_a, judge_b, dense, entail = noisy(0.1), noisy(0.2), noisy(0.15), noisy(0.1)
    has_entailment = rng.random(n) < 0.7
    has_debate = rng.random(n) < 0.2
    debate_agrees = (labels == 1) ^ (rng.random(n) < 0.2)  # right 80 % of the time
    rank = rng.integers(1, 6, n)
    signals = [
        Signals(
            ensemble_p_match=float(quality[i]),
            dense_score=float(dense[i]),
            retrieval_rank=int(rank[i]),
            judge_p_yes={"a": float(judge_a[i]), "b": float(judge_b[i])},
            entailment_p_entail=float(entail[i]) if has_entailment[i] else None,
            debate=(
                (DebateOutcome.AGREED_RELEVANT if debate_agrees[i] else DebateOutcome.DISAGREED)
                if has_debate[i]
                else None
            ),
        )
        for i in range(n)
    ]
    return signals, labels


def synthetic_data(n: int = 400, seed: int = 0) -> LabelledSignals:
    signals, labels = synthetic_signals(n, seed)
    return LabelledSignals(
        tuple(signals), labels, sha256=f"synthetic-{n}-{seed}", source="synthetic"
    )
