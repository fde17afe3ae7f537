"""The matcher's features for every (query, KB entry) pair at once, as matrices.

The same definitions as :func:`tribunal.ensemble.match_feature_values` (which the
served matcher computes pair by pair): cosines of normalised vectors of the query
with the entry's question, answer and question + answer, and rapidfuzz's token-set
ratio / 100 of the query and the question. A test keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from ..embedding import Embedder

__all__ = ["EntryTexts", "PairFeatures", "pair_features"]


@dataclass(frozen=True)
class EntryTexts:
    """The KB's entries as the matcher sees them, in one order."""

    ids: tuple[str, ...]
    questions: tuple[str, ...]
    answers: tuple[str, ...]


@dataclass(frozen=True)
class PairFeatures:
    """Each feature as a (queries × entries) matrix."""

    values: dict[str, NDArray[np.float64]]

    def rows(
        self, query_rows: NDArray[np.int64], entry_cols: NDArray[np.int64]
    ) -> dict[str, NDArray[np.float64]]:
        """The features of the pairs (query_rows[i], entry_cols[i])."""
        return {name: matrix[query_rows, entry_cols] for name, matrix in self.values.items()}


def pair_features(queries: Sequence[str], entries: EntryTexts, embedder: Embedder) -> PairFeatures:
    """Every :data:`~tribunal.ensemble.MATCH_FEATURES` value of every pair."""
    from rapidfuzz import fuzz, process, utils

    both = [f"{q} {a}" for q, a in zip(entries.questions, entries.answers, strict=True)]
    query_vectors = embedder.embed(list(queries), progress=True).astype(np.float64)

    def cosine(texts: Sequence[str]) -> NDArray[np.float64]:
        vectors = embedder.embed(list(texts)).astype(np.float64)
        product: NDArray[np.float64] = query_vectors @ vectors.T
        return product

    token_set = process.cdist(
        list(queries),
        list(entries.questions),
        scorer=fuzz.token_set_ratio,
        processor=utils.default_process,
        dtype=np.float64,
    )
    return PairFeatures(
        {
            "cos_question": cosine(entries.questions),
            "cos_answer": cosine(entries.answers),
            "cos_question_answer": cosine(both),
            "token_set": np.asarray(token_set, dtype=np.float64) / 100.0,
        }
    )
