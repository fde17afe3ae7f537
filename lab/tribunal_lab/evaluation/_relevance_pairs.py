"""Judged (query, passage) pairs and embedding-cosine relevance scores, with cached vectors.

Pairs come from a JSONL file with ``qid, query, pid, passage, relevance`` (TREC DL 2019's
``dl19_judged_pairs.jsonl`` and files like it). Cosines use the embedding caches of
:mod:`._embedding_cache`, so each text is embedded once per (model, prompt).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._io import read_jsonl
from ._embedding_cache import EmbeddingCache

__all__ = ["Pair", "artifact_scores", "cosines", "load_pairs", "pair_vectors", "split_queries"]


@dataclass(frozen=True)
class Pair:
    qid: str
    query: str
    pid: str
    passage: str
    grade: int
    label: int
    """1 when ``grade`` reaches the relevant grade."""


def load_pairs(path: Path, relevant_at: int = 2) -> list[Pair]:
    pairs = []
    for row in read_jsonl(path):
        grade = int(row["relevance"])
        pairs.append(
            Pair(
                str(row["qid"]),
                row["query"],
                str(row["pid"]),
                row["passage"],
                grade,
                int(grade >= relevant_at),
            )
        )
    return pairs


def split_queries(pairs: Sequence[Pair], seed: int) -> tuple[set[str], set[str]]:
    """Two halves of the queries at random (the first gets the extra one of an odd count)."""
    queries = sorted({p.qid for p in pairs})
    order = np.random.default_rng(seed).permutation(len(queries))
    half = (len(queries) + 1) // 2
    return {queries[i] for i in order[:half]}, {queries[i] for i in order[half:]}


def pair_vectors(
    pairs: Sequence[Pair],
    model_key: str,
    settings: Any,
    *,
    query_prompt: str | None = None,
    document_prompt: str | None = None,
) -> tuple[NDArray[np.float32], NDArray[np.float32]]:
    """(query vectors, passage vectors), one row per pair, from the caches (filled first)."""
    queries = EmbeddingCache(model_key, query_prompt)
    documents = (
        queries if document_prompt == query_prompt else EmbeddingCache(model_key, document_prompt)
    )
    queries.fill([p.query for p in pairs], settings)
    documents.fill([p.passage for p in pairs], settings)
    return queries.matrix([p.query for p in pairs]), documents.matrix([p.passage for p in pairs])


def cosines(pairs: Sequence[Pair], model_key: str, settings: Any, **prompts: Any) -> NDArray[Any]:
    q, d = pair_vectors(pairs, model_key, settings, **prompts)
    values: NDArray[np.float64] = np.einsum("ij,ij->i", q, d).astype(np.float64)
    return np.clip(values, -1.0, 1.0)


def artifact_scores(pairs: Sequence[Pair], artifact: Any, settings: Any) -> NDArray[np.float64]:
    """P(relevant) of a relevance artifact made of cosine features, as the judge serves it
    (the embedder without a prompt, the artifact's regression on the raw cosines)."""
    columns = []
    for feature in artifact.features:
        if feature.kind != "cosine":
            raise ValueError(
                f"feature {feature.name!r} is {feature.kind}: only cosine features are "
                "computed from cached vectors"
            )
        columns.append(cosines(pairs, feature.model_key, settings))
    values = np.column_stack(columns)
    return np.array([artifact.p_relevant(list(row)) for row in values])
