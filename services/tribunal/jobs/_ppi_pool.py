"""The pool of a retrieval evaluation and its metrics as functions of label totals.

A pool is every (query, document) pair some run ranks within its evaluation depth,
plus the pairs an existing qrels file judges. A label of pair i is its grade g_i,
stored as cumulative indicators ``z_i[t] = 1{g_i >= t + 1}`` (t = 0 .. G − 1): then
every metric here is a function of *per-query totals that are linear in z* —

- DCG@k of a run: Σ over its top k of grade / log2(rank + 1), grade = Σ_t z[t];
- hits@k of a run: Σ over its top k of z[relevant_at − 1];
- the pool's counts C_t = Σ z[t] (documents of grade ≥ t + 1), which fix the ideal
  DCG@k (:func:`ideal_dcg`) and the number of relevant documents (recall's divisor).

So nDCG@k = DCG / IDCG(C), P@k = hits@k / k and R@k = hits@k / C_rel are smooth (piecewise)
functions of linear totals: :mod:`._ppi` corrects the totals with a human sample and
linearises the metrics. Labels may be real-valued (a judge's expected label); with 0/1
indicators every metric equals trec_eval's (``ir-measures``: nDCG@10, P(rel=2)@10,
R(rel=2)@100; the tests check it), documents ordered by score, ties by docid descending.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "METRICS",
    "MetricSpec",
    "QueryLinearisation",
    "RunPool",
    "discounts",
    "ideal_dcg",
    "metric_gradients",
    "metric_linearisation",
    "metric_values",
    "numerator_weights",
    "parse_metric",
]

Kind = Literal["ndcg", "p", "recall"]

Floats = NDArray[np.float64]


@dataclass(frozen=True)
class MetricSpec:
    """One metric: ``kind`` at cutoff ``k`` (nDCG uses grades as gains)."""

    kind: Kind
    k: int

    @property
    def name(self) -> str:
        return {"ndcg": "nDCG", "p": "P", "recall": "R"}[self.kind] + f"@{self.k}"


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("ndcg", 10),
    MetricSpec("p", 10),
    MetricSpec("recall", 100),
)
"""The default metrics: nDCG@10, P@10, R@100."""


def parse_metric(text: str) -> MetricSpec:
    """``nDCG@10`` / ``P@10`` / ``R@100`` (case-insensitive) → a spec."""
    name, at, cutoff = text.strip().partition("@")
    kinds: dict[str, Kind] = {"ndcg": "ndcg", "p": "p", "r": "recall", "recall": "recall"}
    kind = kinds.get(name.lower())
    if not at or kind is None or not cutoff.isdigit() or not 1 <= int(cutoff) <= 1000:
        raise ValueError(f"metric {text!r} is not nDCG@K, P@K or R@K (1 <= K <= 1000)")
    return MetricSpec(kind, int(cutoff))


def discounts(k: int) -> Floats:
    """1 / log2(rank + 1) for ranks 1 .. k."""
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def ideal_dcg(counts: Floats, k: int) -> tuple[Floats, Floats]:
    """IDCG@k of each row of ``counts`` (queries × G: documents of grade ≥ t + 1) and its
    derivative in each count.

    The ideal ranking puts the grade-G documents first, then grade G − 1, ...; the gain at
    rank r is the number of thresholds t with C_t ≥ r, so IDCG = Σ_t F(C_t) with
    F(c) = Σ_{r ≤ min(c, k)} D_r. F is extended to real c by linear interpolation
    (F(c) = 0 for c ≤ 0), so that it is defined, continuous and piecewise linear for
    estimated counts; its slope is D_{⌊c⌋+1} inside (0, k) and 0 outside.
    """
    d = discounts(k)
    cumulative = np.concatenate([[0.0], np.cumsum(d)])
    c = np.clip(counts, 0.0, float(k))
    whole = np.minimum(np.floor(c).astype(np.intp), k)
    slope_index = np.minimum(whole, k - 1)
    frac = c - whole
    values = cumulative[whole] + frac * d[slope_index]
    slopes = np.where((counts > 0) & (counts < k), d[slope_index], 0.0)
    return values.sum(axis=1), slopes


@dataclass(frozen=True)
class RunPool:
    """Pairs, their queries, and each run's rank of each pair.

    ``ranks[run][i]``: the 1-based rank of pair i in that run's list for its query, 0 when
    the run does not retrieve it (within the depth read). Queries are those of the runs.
    """

    queries: tuple[str, ...]
    pairs: tuple[tuple[str, str], ...]
    query_of: NDArray[np.intp]
    ranks: Mapping[str, NDArray[np.int32]]
    _slots: dict[tuple[str, Kind, int, int], tuple[NDArray[np.intp], Floats]] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def build(
        cls,
        runs: Mapping[str, Mapping[str, Sequence[str]]],
        *,
        depth: int,
        known: Mapping[tuple[str, str], int] | None = None,
    ) -> RunPool:
        """The pool of ``runs`` (name → qid → docids ranked) cut at ``depth``, plus the
        pairs of ``known`` qrels for the runs' queries."""
        queries = sorted({qid for ranking in runs.values() for qid in ranking})
        index: dict[tuple[str, str], int] = {}
        for ranking in runs.values():
            for qid in queries:
                for docid in list(ranking.get(qid, ()))[:depth]:
                    index.setdefault((qid, docid), len(index))
        wanted = set(queries)
        for qid, docid in known or {}:
            if qid in wanted:
                index.setdefault((qid, docid), len(index))
        pairs = tuple(index)
        position = {qid: n for n, qid in enumerate(queries)}
        query_of = np.array([position[qid] for qid, _ in pairs], dtype=np.intp)
        ranks: dict[str, NDArray[np.int32]] = {}
        for name, ranking in runs.items():
            rank = np.zeros(len(pairs), dtype=np.int32)
            for qid in queries:
                for r, docid in enumerate(list(ranking.get(qid, ()))[:depth], start=1):
                    rank[index[(qid, docid)]] = r
            ranks[name] = rank
        return cls(tuple(queries), pairs, query_of, ranks)

    @property
    def size(self) -> int:
        return len(self.pairs)

    def query_sums(self, values: Floats) -> Floats:
        """Per-query sums of ``values`` (pairs × columns) → queries × columns."""
        queries = len(self.queries)
        return np.stack(
            [np.bincount(self.query_of, weights=column, minlength=queries) for column in values.T],
            axis=1,
        )


def _run_totals(
    pool: RunPool, run: str, z: Floats, spec: MetricSpec, relevant_at: int
) -> tuple[Floats, Floats]:
    """(per-query numerator total, per-pair weights of z's columns in it)."""
    rank = pool.ranks[run]
    inside = (rank >= 1) & (rank <= spec.k)
    weights = np.zeros((pool.size, z.shape[1]))
    if spec.kind == "ndcg":
        d = discounts(spec.k)
        weights[inside, :] = d[rank[inside] - 1][:, None]
    else:
        weights[inside, relevant_at - 1] = 1.0
    numerator = pool.query_sums((weights * z).sum(axis=1, keepdims=True))[:, 0]
    return numerator, weights


def metric_values(
    pool: RunPool, run: str, z: Floats, spec: MetricSpec, *, relevant_at: int = 2
) -> Floats:
    """Per-query values of ``spec`` for ``run`` under labels ``z`` (pairs × G)."""
    values, _ = _values_and_gradient(pool, run, z, spec, relevant_at, gradient=False)
    return values


def metric_gradients(
    pool: RunPool, run: str, z: Floats, spec: MetricSpec, *, relevant_at: int = 2
) -> tuple[Floats, Floats]:
    """(per-query values, ∂ mean-over-queries / ∂ z: pairs × G) at labels ``z``."""
    values, gradient = _values_and_gradient(pool, run, z, spec, relevant_at, gradient=True)
    assert gradient is not None
    return values, gradient


def _values_and_gradient(
    pool: RunPool, run: str, z: Floats, spec: MetricSpec, relevant_at: int, *, gradient: bool
) -> tuple[Floats, Floats | None]:
    if not 1 <= relevant_at <= z.shape[1]:
        raise ValueError(f"relevant_at {relevant_at} outside grades 1..{z.shape[1]}")
    queries = len(pool.queries)
    numerator, weights = _run_totals(pool, run, z, spec, relevant_at)
    q = pool.query_of
    if spec.kind == "p":
        values = numerator / spec.k
        grad = weights / (spec.k * queries) if gradient else None
        return values, grad
    counts = pool.query_sums(z)
    if spec.kind == "ndcg":
        divisor, slopes = ideal_dcg(counts, spec.k)
        d_divisor = slopes  # queries × G
    else:
        divisor = counts[:, relevant_at - 1].copy()
        d_divisor = np.zeros_like(counts)
        d_divisor[:, relevant_at - 1] = 1.0
    # A query whose pool holds nothing relevant scores 0 (trec_eval's convention).
    positive = divisor > 1e-12
    safe = np.where(positive, divisor, 1.0)
    values = np.where(positive, numerator / safe, 0.0)
    if not gradient:
        return values, None
    # ∂(num / div) = ∂num / div − num / div² ∂div, per pair through its query.
    scale = np.where(positive, 1.0 / safe, 0.0)
    ratio = np.where(positive, numerator / safe**2, 0.0)
    grad = weights * scale[q][:, None] - ratio[q][:, None] * d_divisor[q]
    return values, grad / queries


@dataclass(frozen=True)
class QueryLinearisation:
    """A run's metric at labels z through per-query totals: the per-query values, and
    the mean's derivative in each query's numerator total (``numerator``: queries) and in
    each of its counts C_t (``counts``: queries × G). A pair's gradient is its numerator
    weight times ``numerator[q]`` plus ``counts[q]`` (every pair of q adds to C_t)."""

    values: Floats
    numerator: Floats
    counts: Floats
    slots: NDArray[np.intp]
    """The pairs the run ranks within the cutoff."""
    slot_weights: Floats
    """Their weights in the numerator (slots × G)."""

    def numerator_totals(self, x: Floats, query_of: NDArray[np.intp]) -> Floats:
        """Per-query numerator totals of labels ``x`` (pairs × G)."""
        totals: Floats = np.bincount(
            query_of[self.slots],
            weights=np.einsum("ij,ij->i", self.slot_weights, x[self.slots]),
            minlength=len(self.values),
        ).astype(np.float64)
        return totals

    def row_gradients(
        self, rows: NDArray[np.intp], query_of: NDArray[np.intp], weights: Floats
    ) -> Floats:
        """∂ mean / ∂ z of ``rows`` (rows × G), their numerator ``weights`` given."""
        q = query_of[rows]
        gradient: Floats = weights * self.numerator[q][:, None] + self.counts[q]
        return gradient


def _slots(
    pool: RunPool, run: str, spec: MetricSpec, columns: int, relevant_at: int
) -> tuple[NDArray[np.intp], Floats]:
    """The pairs ``run`` ranks within ``spec.k`` and their numerator weights (cached)."""
    key = (run, spec.kind, spec.k, relevant_at)
    cached = pool._slots.get(key)
    if cached is None or cached[1].shape[1] != columns:
        rank = pool.ranks[run]
        slots = np.flatnonzero((rank >= 1) & (rank <= spec.k))
        cached = (slots, numerator_weights(rank[slots], spec, columns, relevant_at))
        pool._slots[key] = cached
    return cached


def numerator_weights(
    rank: NDArray[np.int32], spec: MetricSpec, columns: int, relevant_at: int
) -> Floats:
    """Numerator weights (pairs × G) of pairs at ``rank`` (0 or past the cutoff: none)."""
    weights = np.zeros((len(rank), columns))
    inside = (rank >= 1) & (rank <= spec.k)
    if spec.kind == "ndcg":
        weights[inside, :] = discounts(spec.k)[rank[inside] - 1][:, None]
    else:
        weights[inside, relevant_at - 1] = 1.0
    return weights


def metric_linearisation(
    pool: RunPool,
    run: str,
    z: Floats,
    spec: MetricSpec,
    *,
    counts: Floats,
    relevant_at: int = 2,
) -> QueryLinearisation:
    """The same values and gradient as :func:`metric_gradients`, kept per query:
    ``counts`` = ``pool.query_sums(z)`` (shared by every run). Costs the run's top-k
    pairs, not the pool."""
    if not 1 <= relevant_at <= z.shape[1]:
        raise ValueError(f"relevant_at {relevant_at} outside grades 1..{z.shape[1]}")
    queries = len(pool.queries)
    slots, weights = _slots(pool, run, spec, z.shape[1], relevant_at)
    numerator = np.bincount(
        pool.query_of[slots],
        weights=np.einsum("ij,ij->i", weights, z[slots]),
        minlength=queries,
    )
    d_counts = np.zeros_like(counts)
    if spec.kind == "p":
        values = numerator / spec.k
        d_numerator = np.full(queries, 1.0 / spec.k)
    else:
        if spec.kind == "ndcg":
            divisor, slopes = ideal_dcg(counts, spec.k)
        else:
            divisor = counts[:, relevant_at - 1].copy()
            slopes = np.zeros_like(counts)
            slopes[:, relevant_at - 1] = 1.0
        positive = divisor > 1e-12
        safe = np.where(positive, divisor, 1.0)
        values = np.where(positive, numerator / safe, 0.0)
        d_numerator = np.where(positive, 1.0 / safe, 0.0)
        d_counts = -np.where(positive, numerator / safe**2, 0.0)[:, None] * slopes
    return QueryLinearisation(values, d_numerator / queries, d_counts / queries, slots, weights)
