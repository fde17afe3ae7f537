"""Labelled confidence signals from COVID-QA question pairs: a stand-in calibration set.

COVID-QA's ``question_similarity_en.jsonl`` pairs a user question
with an FAQ question, label 1 when they ask the same thing: exactly the
"does this KB entry match the query" decision the confidence service gates.
Until the ensemble's matching data exists, two real signals are computed per
pair: the profile embedder's cosine similarity (``dense_score``, as retrieval
computes it) and rapidfuzz's token-set ratio / 100 (``extra.token_set_ratio``,
a lexical-overlap score standing in for a sparse one). No judge, entailment or
debate signal is present, so those stay missing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from rapidfuzz import fuzz, utils
from tribunal.confidence import Signals, write_labelled_signals
from tribunal.core import InvalidArgumentError, NotFoundError, Settings, jsonl_rows, load_embedder

__all__ = ["build_question_similarity_signals"]


def build_question_similarity_signals(
    settings: Settings, source: Path, out: Path, *, limit_per_label: int | None = None
) -> dict[str, Any]:
    """Compute the signals of every pair in ``source`` and write labelled JSONL to ``out``.

    ``limit_per_label`` keeps the first N pairs of each label (for quick tests).
    Returns a summary: rows, positives, sha256, embedder.
    """
    if not source.is_file():
        raise NotFoundError(f"{source} does not exist (the COVID-QA question-similarity file)")
    pairs: list[tuple[str, str, int]] = []
    kept = {0: 0, 1: 0}
    for where, _, row in jsonl_rows(source, field="data"):
        label = int(row["label"])
        if label not in kept:
            raise InvalidArgumentError(f"{where}: label must be 0 or 1", field="label")
        if limit_per_label is not None and kept[label] >= limit_per_label:
            continue
        kept[label] += 1
        pairs.append((row["question_1"], row["question_2"], label))
    embedder = load_embedder(settings)
    texts = sorted({text for a, b, _ in pairs for text in (a, b)})
    vectors = embedder.encode(
        texts,
        batch_size=settings.retrieval.embed_batch_size,
        normalize_embeddings=True,
        show_progress_bar=False,
    )
    index = {text: i for i, text in enumerate(texts)}
    signals, labels, ids = [], [], []
    for number, (query, kb_question, label) in enumerate(pairs):
        cosine = float(np.dot(vectors[index[query]], vectors[index[kb_question]]))
        overlap = fuzz.token_set_ratio(query, kb_question, processor=utils.default_process) / 100
        signals.append(Signals(dense_score=cosine, extra={"token_set_ratio": overlap}))
        labels.append(label)
        ids.append(f"pair-{number}")
    digest = write_labelled_signals(out, signals, labels, ids)
    assert settings.roles is not None
    return {
        "rows": len(signals),
        "positives": sum(labels),
        "sha256": digest,
        "embedder": settings.models[settings.roles.embedder].artifact
        or settings.models[settings.roles.embedder].hf_id,
        "out": str(out),
    }
