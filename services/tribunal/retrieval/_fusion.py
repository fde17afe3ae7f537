"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009).

Written here rather than taken from ``ranx``: ``ranx.fuse`` takes whole runs (``Run``
objects over many queries), where a search fuses two lists of about a hundred ids for
one query and keeps the first few; building runs per query would cost more than the
sum, which is a few numpy operations on the lists as they come.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["reciprocal_rank_fusion"]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], *, k: int = 60, limit: int | None = None
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(d) = Σ_lists 1 / (k + rank(d)), ranks 1-based.

    Ties keep the order of first appearance (best rank first, earlier list
    first), so the result is deterministic.

    Args:
        rankings: Ranked lists of ids, best first; an id appears at most once per list.
        k: Damping constant; 60 as in the paper.
        limit: Return only the first ``limit`` pairs (None: all).

    Returns:
        ``(id, fused score)`` pairs, best first.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    numbering: dict[str, int] = {}
    codes = [
        np.fromiter(
            (numbering.setdefault(item, len(numbering)) for item in ranking),
            dtype=np.int64,
            count=len(ranking),
        )
        for ranking in rankings
    ]
    if not numbering:
        return []
    scores = np.zeros(len(numbering), dtype=np.float64)
    # First appearance as one integer: rank first, then the list's index.
    first = np.full(len(numbering), np.iinfo(np.int64).max, dtype=np.int64)
    width = len(rankings)
    for list_index, ranked in enumerate(codes):
        ranks = np.arange(1, len(ranked) + 1, dtype=np.int64)
        # Added list by list, in the order a running sum would: the same floats.
        scores[ranked] += 1.0 / (k + ranks)
        first[ranked] = np.minimum(first[ranked], ranks * width + list_index)
    order = np.lexsort((first, -scores))[:limit]
    ids = list(numbering)
    return [
        (ids[i], score) for i, score in zip(order.tolist(), scores[order].tolist(), strict=True)
    ]
