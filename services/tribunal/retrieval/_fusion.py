"""Reciprocal rank fusion (Cormack, Clarke & Büttcher, SIGIR 2009)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["reciprocal_rank_fusion"]


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], *, k: int = 60
) -> list[tuple[str, float]]:
    """Fuse ranked id lists: score(d) = Σ_lists 1 / (k + rank(d)), ranks 1-based.

    Ties keep the order of first appearance (best rank first, earlier list
    first), so the result is deterministic.

    Args:
        rankings: Ranked lists of ids, best first; an id appears at most once per list.
        k: Damping constant; 60 as in the paper.

    Returns:
        ``(id, fused score)`` pairs, best first.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    scores: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    for list_index, ranking in enumerate(rankings):
        for rank, item in enumerate(ranking, start=1):
            if item in scores:
                scores[item] += 1.0 / (k + rank)
                first_seen[item] = min(first_seen[item], (rank, list_index))
            else:
                scores[item] = 1.0 / (k + rank)
                first_seen[item] = (rank, list_index)
    order = {item: (-score, first_seen[item]) for item, score in scores.items()}
    return [(item, scores[item]) for item in sorted(scores, key=order.__getitem__)]
