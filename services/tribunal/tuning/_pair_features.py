"""The matcher's features for every (query, KB entry) pair at once, as matrices.

The same definitions as :func:`tribunal.ensemble.match_feature_values` (which the
served matcher computes pair by pair): cosines of normalised vectors of the query
with the entry's question, answer and question + answer, and rapidfuzz's token-set
ratio / 100 of the query and the question. An entry with several phrasings takes, for
each question feature, the maximum over its phrasings, as the served matcher does. A
test keeps the two equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from ..kb import phrasing_key

if TYPE_CHECKING:
    from ..embedding import Embedder

__all__ = ["EntryTexts", "PairFeatures", "pair_features"]


@dataclass(frozen=True)
class EntryTexts:
    """The KB's entries as the matcher sees them, in one order."""

    ids: tuple[str, ...]
    questions: tuple[str, ...]
    answers: tuple[str, ...]
    phrasings: tuple[tuple[str, ...], ...] = ()
    """Per entry, every phrasing of its question (``question`` first); empty: the
    questions alone."""

    def all_phrasings(self) -> tuple[tuple[str, ...], ...]:
        """Per entry, its phrasings (its question alone when none were given)."""
        if not self.phrasings:
            return tuple((q,) for q in self.questions)
        return tuple(texts or (q,) for texts, q in zip(self.phrasings, self.questions, strict=True))


@dataclass(frozen=True)
class PairFeatures:
    """Each feature as a (queries × entries) matrix."""

    values: dict[str, NDArray[np.float64]]

    def rows(
        self, query_rows: NDArray[np.int64], entry_cols: NDArray[np.int64]
    ) -> dict[str, NDArray[np.float64]]:
        """The features of the pairs (query_rows[i], entry_cols[i])."""
        return {name: matrix[query_rows, entry_cols] for name, matrix in self.values.items()}


def pair_features(
    queries: Sequence[str],
    entries: EntryTexts,
    embedder: Embedder,
    *,
    entry_embedder: Embedder | None = None,
    leave_out_own: bool = False,
) -> PairFeatures:
    """Every :data:`~tribunal.ensemble.MATCH_FEATURES` value of every pair.

    ``entry_embedder`` (default: ``embedder``, the same model) embeds the entries' texts:
    one that keeps them in the KB's vector store, as the served matcher does, so that
    the queries do not go there. ``leave_out_own``: an entry's added phrasings with a
    query's words (:func:`~tribunal.kb.phrasing_key`; never its first phrasing, the
    question) do not count for that query — the features of a query the KB was taught,
    as the served matcher sees it when the gateway leaves its own phrasing out.
    """
    from rapidfuzz import fuzz, process, utils

    query_vectors = embedder.embed(list(queries), progress=True).astype(np.float64)
    entry_model = entry_embedder or embedder

    def cosine(texts: Sequence[str]) -> NDArray[np.float64]:
        vectors = entry_model.embed(list(texts), progress=len(texts) >= 100).astype(np.float64)
        product: NDArray[np.float64] = query_vectors @ vectors.T
        return product

    phrasings = entries.all_phrasings()
    owner = np.asarray([j for j, texts in enumerate(phrasings) for _ in texts], dtype=np.int64)
    flat = [text for texts in phrasings for text in texts]
    both = [f"{text} {entries.answers[int(j)]}" for text, j in zip(flat, owner, strict=True)]

    # (query, phrasing) pairs left out: the query's own added phrasings.
    own: tuple[NDArray[np.int64], NDArray[np.int64]] | None = None
    if leave_out_own:
        added: dict[str, list[int]] = {}
        position = 0
        for texts in phrasings:
            for index, text in enumerate(texts):
                if index:
                    added.setdefault(phrasing_key(text), []).append(position + index)
            position += len(texts)
        pairs = [(i, p) for i, q in enumerate(queries) for p in added.get(phrasing_key(q), ())]
        own = (
            np.asarray([i for i, _ in pairs], dtype=np.int64),
            np.asarray([p for _, p in pairs], dtype=np.int64),
        )

    def by_entry(per_phrasing: NDArray[np.float64]) -> NDArray[np.float64]:
        # The best phrasing of each entry decides (the served matcher's maximum).
        if own is not None:
            per_phrasing = per_phrasing.copy()
            per_phrasing[own] = -np.inf
        reduced = np.full((per_phrasing.shape[0], len(phrasings)), -np.inf)
        for j in range(len(phrasings)):
            reduced[:, j] = per_phrasing[:, owner == j].max(axis=1)
        return reduced

    token_set = process.cdist(
        list(queries),
        flat,
        scorer=fuzz.token_set_ratio,
        processor=utils.default_process,
        dtype=np.float64,
    )
    return PairFeatures(
        {
            "cos_question": by_entry(cosine(flat)),
            "cos_answer": cosine(entries.answers),
            "cos_question_answer": by_entry(cosine(both)),
            "token_set": by_entry(np.asarray(token_set, dtype=np.float64) / 100.0),
        }
    )
