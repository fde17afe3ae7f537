"""Dense retrieval: unit vectors in a FAISS index, best unit per entry.

Rows are search units (an entry's question and chunks). FAISS row ids are
positions; deleting or replacing an entry tombstones its rows (searches skip
them) until the owner rebuilds the index without them (compaction). The
index type follows the size: exact ``IndexFlatIP`` below
``flat_max_vectors``, ``IndexHNSWFlat`` or ``IndexIVFPQ`` above; inner
product on unit vectors is cosine similarity. With a GPU visible, flat and
IVF-PQ indexes move to it (FAISS has no GPU HNSW; that one stays on CPU).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import faiss
import numpy as np
from numpy.typing import NDArray

from ..core import RetrievalSettings
from ._ranked import RankedUnits

__all__ = ["DenseIndex", "choose_index_type", "gpu_count", "neighbour_votes"]

FLAT = "IndexFlatIP"
HNSW = "IndexHNSWFlat"
IVFPQ = "IndexIVFPQ"
# IVF-PQ needs enough points to train 256 codewords per sub-quantizer and
# its coarse cells; below this a large_index of "ivfpq" falls back to HNSW.
_IVFPQ_MIN_TRAINING = 10_000


def gpu_count() -> int:
    """GPUs FAISS can use (0 with faiss-cpu)."""
    return int(faiss.get_num_gpus())


def choose_index_type(vectors: int, settings: RetrievalSettings) -> str:
    """The FAISS index class for a collection of ``vectors`` unit vectors."""
    if vectors < settings.flat_max_vectors:
        return FLAT
    if settings.large_index == "ivfpq" and vectors >= _IVFPQ_MIN_TRAINING:
        return IVFPQ
    return HNSW


def _pq_subquantizers(dimension: int, wanted: int) -> int:
    """The largest divisor of ``dimension`` not above ``wanted`` (PQ needs one)."""
    return max(m for m in range(1, min(wanted, dimension) + 1) if dimension % m == 0)


def neighbour_votes(
    scores: Sequence[float], entries: Sequence[str], *, temperature: float
) -> dict[str, float]:
    """Each entry's share of a query's nearest units, ``scores`` (cosines, best first) and
    ``entries`` (their owners) being those units: a unit weighs
    exp((cosine − best cosine) / temperature), and an entry's vote is its units' weight
    over the total.

    Why: once a team's reviewed queries are phrasings of their entries, this is a
    k-nearest-neighbour vote over labelled examples. The best phrasing alone (the dense
    score) says how close the nearest example is; the vote says whether the query's whole
    neighbourhood agrees on the entry — a query among the phrasings of two entries gets
    about half for each, however close its nearest one.
    """
    if not scores:
        return {}
    best = scores[0]
    weights = np.exp((np.asarray(scores, dtype=np.float64) - best) / temperature)
    total = float(weights.sum())
    summed: dict[str, float] = {}
    for entry_id, weight in zip(entries, weights.tolist(), strict=True):
        summed[entry_id] = summed.get(entry_id, 0.0) + weight
    # Divided once, and capped: ten shares of one entry must not add up to 1 + 2⁻⁵².
    return {entry_id: min(1.0, weight / total) for entry_id, weight in summed.items()}


def group_best_per_entry(
    scores: NDArray[np.float32],
    *,
    rows: NDArray[np.int64],
    row_entry: Sequence[str],
    row_unit: Sequence[str],
    live: NDArray[np.bool_],
    depth: int,
    neighbours: int = 0,
    temperature: float = 0.05,
    skip: frozenset[tuple[str, str]] = frozenset(),
    row_code: NDArray[np.int64] | None = None,
) -> RankedUnits:
    """Walk one query's rows best first; keep each live entry's first (best) unit.

    ``neighbours`` > 0: each kept entry also carries its :func:`neighbour_votes` share of
    the first ``neighbours`` live units (0.0 when none of them is its). ``skip``:
    ``(entry id, unit id)`` pairs passed over as if they were not indexed. ``row_code``:
    an integer per row, the same for the rows of one entry (computed when not given)."""
    # Array operations rather than a walk row by row: a query reads a few hundred rows
    # to fill its hundred entries, and the walk in Python cost more than the search.
    found = np.asarray(rows, dtype=np.int64)
    row_scores = np.asarray(scores)
    present = found >= 0  # FAISS pads with -1 where it has fewer rows than asked
    found, row_scores = found[present], row_scores[present]
    alive = live[found]
    found, row_scores = found[alive], row_scores[alive]
    if skip:
        kept = np.fromiter(
            ((row_entry[r], row_unit[r]) not in skip for r in found.tolist()),
            dtype=bool,
            count=len(found),
        )
        found, row_scores = found[kept], row_scores[kept]
    picked = first_row_per_entry(found, depth, row_code, row_entry)
    votes: dict[str, float] | None = None
    if neighbours > 0:
        near = found[:neighbours].tolist()
        votes = neighbour_votes(
            row_scores[:neighbours].tolist(),
            [row_entry[r] for r in near],
            temperature=temperature,
        )
    best = found[picked].tolist()
    entry_ids = [row_entry[row] for row in best]
    return RankedUnits(
        entry_ids,
        [row_unit[row] for row in best],
        row_scores[picked].tolist(),
        None if votes is None else [votes.get(entry_id, 0.0) for entry_id in entry_ids],
    )


def first_row_per_entry(
    ordered_rows: NDArray[np.int64],
    depth: int,
    row_code: NDArray[np.int64] | None,
    row_entry: Sequence[str],
) -> NDArray[np.int64]:
    """Positions in ``ordered_rows`` (best first) of each entry's first row, in order, at
    most ``depth`` of them; ``row_code``: each row's entry as an integer (else derived
    from ``row_entry``)."""
    if row_code is not None:
        codes = row_code[ordered_rows]
    else:
        numbering: dict[str, int] = {}
        codes = np.fromiter(
            (numbering.setdefault(row_entry[r], len(numbering)) for r in ordered_rows.tolist()),
            dtype=np.int64,
            count=len(ordered_rows),
        )
    _, first = np.unique(codes, return_index=True)
    first.sort()
    return first[:depth]


def entry_codes(row_entry: Sequence[str], numbering: dict[str, int]) -> NDArray[np.int64]:
    """Each row's entry as an integer from ``numbering`` (new entries numbered as met)."""
    return np.fromiter(
        (numbering.setdefault(entry_id, len(numbering)) for entry_id in row_entry),
        dtype=np.int64,
        count=len(row_entry),
    )


class DenseIndex:
    """A FAISS index over unit vectors with row bookkeeping and tombstones.

    Not thread-safe for writes: the owning collection serialises mutations
    against searches.

    Args:
        dimension: Vector length.
        settings: Index type thresholds and parameters.
    """

    def __init__(self, dimension: int, settings: RetrievalSettings) -> None:
        self.dimension = dimension
        self.settings = settings
        self.index_type = FLAT
        self.on_gpu = False
        self._index: Any = self._new_index(FLAT, None)
        self._row_entry: list[str] = []
        self._row_unit: list[str] = []
        self._live = np.zeros(0, dtype=bool)
        self._rows_of_entry: dict[str, list[int]] = {}
        self._dead = 0
        # Each row's entry as an integer, so that a search groups rows by entry in numpy.
        self._entry_numbers: dict[str, int] = {}
        self._row_code = np.zeros(0, dtype=np.int64)

    # -- sizes -----------------------------------------------------------------
    @property
    def rows(self) -> int:
        """Rows in the FAISS index, dead ones included."""
        return len(self._row_entry)

    @property
    def live_rows(self) -> int:
        return self.rows - self.dead_rows

    @property
    def dead_rows(self) -> int:
        return self._dead

    @property
    def entry_count(self) -> int:
        return len(self._rows_of_entry)

    def needs_rebuild(self) -> bool:
        """True when tombstones pile up or the size calls for another index type."""
        if self.rows and self.dead_rows / self.rows >= self.settings.compact_dead_fraction:
            return True
        # Grow into an approximate index when the collection crosses the threshold;
        # shrinking back to flat waits for compaction so the type does not flap.
        return self.index_type == FLAT and choose_index_type(self.live_rows, self.settings) != FLAT

    # -- building --------------------------------------------------------------
    def _new_index(self, index_type: str, training: NDArray[np.float32] | None) -> Any:
        d, s = self.dimension, self.settings
        index: Any
        if index_type == HNSW:
            index = faiss.IndexHNSWFlat(d, s.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = s.hnsw_ef_construction
            index.hnsw.efSearch = s.hnsw_ef_search
        elif index_type == IVFPQ:
            assert training is not None
            nlist = s.ivf_nlist or int(4 * math.sqrt(len(training)))
            nlist = max(1, min(nlist, len(training) // 39))
            quantizer = faiss.IndexFlatIP(d)
            m = _pq_subquantizers(d, s.pq_subquantizers)
            index = faiss.IndexIVFPQ(quantizer, d, nlist, m, 8, faiss.METRIC_INNER_PRODUCT)
            index.train(training)
            index.nprobe = s.ivf_nprobe
        else:
            index = faiss.IndexFlatIP(d)
        self.on_gpu = False
        if s.use_gpu and index_type != HNSW and gpu_count() > 0:
            index = faiss.index_cpu_to_all_gpus(index)
            self.on_gpu = True
        return index

    def build(
        self, entry_ids: Sequence[str], unit_ids: Sequence[str], vectors: NDArray[np.float32]
    ) -> None:
        """Replace the whole index with these rows; the type is chosen by their number."""
        if len(entry_ids) != len(unit_ids) or len(entry_ids) != len(vectors):
            raise ValueError("entry_ids, unit_ids and vectors must have the same length")
        index_type = choose_index_type(len(vectors), self.settings)
        vectors = np.ascontiguousarray(vectors, dtype=np.float32).reshape(-1, self.dimension)
        self._index = self._new_index(index_type, vectors if index_type == IVFPQ else None)
        self.index_type = index_type
        self._row_entry, self._row_unit = [], []
        self._live = np.zeros(0, dtype=bool)
        self._rows_of_entry = {}
        self._dead = 0
        self._entry_numbers, self._row_code = {}, np.zeros(0, dtype=np.int64)
        self._append(entry_ids, unit_ids, vectors)

    def _append(
        self, entry_ids: Sequence[str], unit_ids: Sequence[str], vectors: NDArray[np.float32]
    ) -> None:
        if not len(vectors):
            return
        start = self.rows
        self._index.add(np.ascontiguousarray(vectors, dtype=np.float32))
        self._row_entry.extend(entry_ids)
        self._row_unit.extend(unit_ids)
        self._live = np.concatenate([self._live, np.ones(len(vectors), dtype=bool)])
        self._row_code = np.concatenate(
            [self._row_code, entry_codes(entry_ids, self._entry_numbers)]
        )
        for offset, entry_id in enumerate(entry_ids):
            self._rows_of_entry.setdefault(entry_id, []).append(start + offset)

    # -- incremental changes ---------------------------------------------------
    def add(self, entry_id: str, unit_ids: Sequence[str], vectors: NDArray[np.float32]) -> None:
        """Index one entry's units (call :meth:`remove` first when replacing)."""
        self._append([entry_id] * len(unit_ids), unit_ids, vectors)

    def remove(self, entry_id: str) -> bool:
        """Tombstone an entry's rows; False if it was not indexed."""
        rows = self._rows_of_entry.pop(entry_id, None)
        if rows is None:
            return False
        self._live[rows] = False
        self._dead += len(rows)
        return True

    # -- search ----------------------------------------------------------------
    def _raw_search(
        self, queries: NDArray[np.float32], k: int
    ) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
        params: Any = None
        if self.index_type == HNSW:
            params = faiss.SearchParametersHNSW(  # type: ignore[attr-defined]
                efSearch=max(self.settings.hnsw_ef_search, k)
            )
        elif self.index_type == IVFPQ and not self.on_gpu:
            params = faiss.SearchParametersIVF(nprobe=self.settings.ivf_nprobe)  # type: ignore[call-arg]
        scores, rows = self._index.search(queries, k, params=params)
        return scores, rows

    def search(
        self,
        queries: NDArray[np.float32],
        depth: int,
        skip: Sequence[frozenset[tuple[str, str]]] = (),
    ) -> list[RankedUnits]:
        """For each query row, up to ``depth`` entries, best first (by their best unit);
        ``skip[i]``: query i's ``(entry id, unit id)`` pairs to pass over."""
        queries = np.ascontiguousarray(queries, dtype=np.float32).reshape(-1, self.dimension)
        if self.rows == 0 or self.live_rows == 0:
            return [RankedUnits([], [], []) for _ in range(len(queries))]
        skipped = list(skip) or [frozenset()] * len(queries)
        # Fetch enough rows to cover `depth` entries: units per entry on average,
        # plus every dead or skipped row in the worst case; double until covered.
        fanout = max(1, math.ceil(self.live_rows / max(1, self.entry_count)))
        neighbours = self.settings.vote_neighbours
        most_skipped = max((len(units) for units in skipped), default=0)
        k = min(self.rows, max(depth * fanout, neighbours) + self.dead_rows + most_skipped)
        results: list[RankedUnits] = [RankedUnits([], [], []) for _ in range(len(queries))]
        pending = list(range(len(queries)))
        while pending:
            scores, rows = self._raw_search(queries[pending], k)
            still: list[int] = []
            for i, query_index in enumerate(pending):
                matches = group_best_per_entry(
                    scores[i],
                    rows=rows[i],
                    row_entry=self._row_entry,
                    row_unit=self._row_unit,
                    live=self._live,
                    depth=depth,
                    neighbours=neighbours,
                    temperature=self.settings.vote_temperature,
                    skip=skipped[query_index],
                    row_code=self._row_code,
                )
                results[query_index] = matches
                if len(matches) < min(depth, self.entry_count) and k < self.rows:
                    still.append(query_index)
            pending = still
            k = min(self.rows, k * 2)
        return results

    # -- snapshots -------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write the index and its row map into ``directory`` (which must exist)."""
        index = self._index
        if self.on_gpu:
            index = faiss.index_gpu_to_cpu(index)
        faiss.write_index(index, str(directory / "dense.faiss"))
        np.savez(
            directory / "dense_rows.npz",
            entry=np.array(self._row_entry, dtype=str),
            unit=np.array(self._row_unit, dtype=str),
            live=self._live,
        )
        (directory / "dense.json").write_text(
            json.dumps({"index_type": self.index_type, "dimension": self.dimension})
        )

    @classmethod
    def load(cls, directory: Path, settings: RetrievalSettings) -> DenseIndex:
        """Read what :meth:`save` wrote."""
        meta = json.loads((directory / "dense.json").read_text())
        dense = cls(int(meta["dimension"]), settings)
        index = faiss.read_index(str(directory / "dense.faiss"))
        dense.index_type = str(meta["index_type"])
        dense.on_gpu = False
        if settings.use_gpu and dense.index_type != HNSW and gpu_count() > 0:
            index = faiss.index_cpu_to_all_gpus(index)
            dense.on_gpu = True
        dense._index = index
        rows = np.load(directory / "dense_rows.npz", allow_pickle=False)
        dense._row_entry = [str(x) for x in rows["entry"]]
        dense._row_unit = [str(x) for x in rows["unit"]]
        dense._live = rows["live"].astype(bool)
        dense._row_code = entry_codes(dense._row_entry, dense._entry_numbers)
        dense._dead = int(len(dense._live) - np.count_nonzero(dense._live))
        for row, (entry_id, alive) in enumerate(zip(dense._row_entry, dense._live, strict=True)):
            if alive:
                dense._rows_of_entry.setdefault(entry_id, []).append(row)
        return dense
