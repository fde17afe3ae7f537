"""The load-test scenario: the COVID FAQ on the whole stack, every LLM role on the 135M model.

Load tests and the Ray Serve integration test measure the deployment (routing,
batching, scaling, proxies), not the models' skill, on a shared 2-core machine;
so every LLM role runs SmolLM2-135M on llama.cpp with one thread, the ensemble
is one judge under majority vote (no trained artifact needed), and the
confidence service loads a Platt calibrator fitted on seeded *synthetic*
signals carrying that judge's name. Decisions are therefore plumbing checks,
not quality figures.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import numpy as np
from tribunal.confidence import FitConfig, LabelledSignals, Signals, fit_artifact
from tribunal.core import Settings, load_settings

__all__ = [
    "JUDGE",
    "TINY_EVERYWHERE",
    "covid_questions",
    "fit_synthetic_calibrator",
    "ingest_faq",
    "scenario_overrides",
    "scenario_settings",
]

JUDGE = "llm_tiny/ral2m"
"""The one ensemble judge: the 135M model with RAL2M's matching prompt."""

TINY_EVERYWHERE: dict[str, Any] = {
    "llm_backend": "llamacpp",
    "llm": {"n_threads": 1, "batch_size": 8},
    "roles": {
        "reranker": "llm_tiny",
        "entailment_fast": "llm_tiny",
        "entailment_strong": "llm_tiny",
        "judges": ["llm_tiny"],
        "debate_agents": ["llm_tiny", "llm_tiny"],
        "adjudicator": "llm_tiny",
    },
    "entailment": {"two_stage": False},
    "ensemble": {"aggregator": "majority", "judges": [JUDGE]},
    "debate": {"max_new_tokens": 64, "max_rounds": 1},
}
"""Setting overrides of the scenario (on top of the tiny profile)."""


def scenario_overrides(data_dir: Path, calibrator: Path, **extra: Any) -> dict[str, Any]:
    """Every override the scenario's services load (give the same to every process)."""
    overrides: dict[str, Any] = json.loads(json.dumps(TINY_EVERYWHERE))
    overrides["data_dir"] = str(data_dir)
    overrides["confidence"] = {"artifact_path": str(calibrator)}
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(overrides.get(key), dict):
            overrides[key] = {**overrides[key], **value}
        else:
            overrides[key] = value
    return overrides


def fit_synthetic_calibrator(
    path: Path, n: int = 600, seed: int = 0, judges: tuple[str, ...] = (JUDGE,)
) -> Path:
    """A Platt calibrator over the scenario's signals (``judges`` by name), fitted on seeded
    synthetic rows."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n).astype(np.int64)
    quality = np.where(labels == 1, rng.beta(5, 2, n), rng.beta(2, 5, n))

    def noisy(scale: float) -> list[float]:
        return [float(v) for v in np.clip(quality + rng.normal(0, scale, n), 0.0, 1.0)]

    votes = {name: noisy(0.1) for name in judges}
    entail, dense = noisy(0.1), noisy(0.15)
    has_chunks = rng.random(n) < 0.7
    rows = [
        Signals(
            ensemble_p_match=float(quality[i]),
            dense_score=dense[i],
            retrieval_rank=int(rng.integers(1, 3)),
            judge_p_yes={name: values[i] for name, values in votes.items()},
            entailment_p_entail=entail[i] if has_chunks[i] else None,
        )
        for i in range(n)
    ]
    data = LabelledSignals(tuple(rows), labels, sha256=f"synthetic-{n}-{seed}", source="synthetic")
    artifact = fit_artifact(data, FitConfig(alphas=(0.05, 0.1), seed=seed))
    return artifact.save(path)


def ingest_faq(settings: Settings, faq: Path, collection: str) -> int:
    """The FAQ knowledge base into ``collection`` (under ``settings.data_dir``)."""
    from tribunal.kb import deduplicate, read_entries
    from tribunal.retrieval import KnowledgeBase

    kb = KnowledgeBase.from_settings(settings)
    try:
        entries, _ = deduplicate(
            read_entries(faq, record_format="faq", max_chars=settings.retrieval.chunk_size_chars)
        )
        return kb.upsert(collection, entries, create=True).total_entries
    finally:
        kb.close()


def covid_questions(pairs: Path, count: int, seed: int) -> list[str]:
    """A seeded sample of real user paraphrases of FAQ questions (COVID-QA similarity set)."""
    rows = [json.loads(line) for line in pairs.read_text().splitlines() if line.strip()]
    paraphrases = [r["question_2"] for r in rows if int(r["label"]) == 1]
    return random.Random(seed).sample(paraphrases, min(count, len(paraphrases)))


def scenario_settings(overrides: dict[str, Any], **server: Any) -> Settings:
    """The tiny profile with the scenario's overrides (what every service loads)."""
    return load_settings("tiny", **overrides, server={"port": 0, "metrics_port": None, **server})
