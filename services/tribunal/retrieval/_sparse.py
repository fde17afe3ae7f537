"""Sparse retrieval: BM25 (``bm25s``) over search units, best unit per entry.

Texts are lower-cased, split into words, stripped of English stopwords and
Snowball-stemmed. ``bm25s`` builds a static index, so the tokenised rows are
kept: removing an entry masks its rows at once, and adding rows marks the
index stale; the owner rebuilds it (from the kept tokens, without the dead
rows) before the next search — cheap next to tokenising.

A text can have no terms at all ("the", punctuation, emoji): such a row is kept (it
matches nothing), and an index whose rows have no terms (an empty vocabulary) has no
BM25 matrix and answers every query with no match.
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import Stemmer

from ..core import RetrievalSettings
from ._dense import entry_codes, first_row_per_entry
from ._ranked import RankedUnits

__all__ = ["SparseIndex", "searchable_terms"]


@functools.cache
def _bm25s() -> Any:
    """``bm25s``, imported on first use: with numba it costs seconds of CPU, which every
    ``tribunal`` command that never searches would pay at start."""
    import bm25s

    # bm25s sets its logger to DEBUG on import, which would put a line in the service
    # log at every index rebuild; its warnings still come through.
    logging.getLogger("bm25s").setLevel(logging.WARNING)
    return bm25s


@functools.cache
def _stopwords() -> frozenset[str]:
    _bm25s()
    from bm25s.stopwords import STOPWORDS_EN

    return frozenset(STOPWORDS_EN)


_local = threading.local()


# bm25s.tokenize's rule (scikit-learn's token pattern, its English stopwords, a stemmer),
# applied here directly: bm25s.tokenize rebuilds its stopword set for every text and opens
# progress bars on every call, a cost paid by every short query. Tests check the two give
# the same terms.
_WORD = re.compile(r"(?u)\b\w\w+\b")


def searchable_terms(texts: Sequence[str]) -> list[list[str]]:
    """The BM25 terms of each text: lower-cased words of two or more letters or digits,
    English stopwords dropped, Snowball-stemmed (empty for "the", symbols, emoji)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:  # a Stemmer is not safe to share between threads
        stemmer = _local.stemmer = Stemmer.Stemmer("english")
    terms: list[list[str]] = []
    stopwords = _stopwords()
    for text in texts:
        words = [w for w in _WORD.findall(text.lower()) if w not in stopwords]
        terms.append(stemmer.stemWords(words) if words else [])
    return terms


class SparseIndex:
    """BM25 over unit texts with row bookkeeping.

    Not thread-safe for writes; :meth:`refresh` must run (under the owner's
    write lock) when :attr:`stale` before searching.
    """

    def __init__(self, settings: RetrievalSettings) -> None:
        self.settings = settings
        self._row_entry: list[str] = []
        self._row_unit: list[str] = []
        self._row_tokens: list[list[str]] = []
        self._live: list[bool] = []
        self._rows_of_entry: dict[str, list[int]] = {}
        self._retriever: Any = None
        self._live_mask: np.ndarray[Any, np.dtype[np.float32]] | None = None
        # Each row's entry as an integer (set by refresh), to group rows by entry in numpy.
        self._row_code = np.zeros(0, dtype=np.int64)
        self.stale = False

    @property
    def rows(self) -> int:
        return len(self._row_entry)

    def tokenize(self, texts: Sequence[str]) -> list[list[str]]:
        """Stemmed, stopword-free word lists (:func:`searchable_terms`)."""
        return searchable_terms(texts)

    # -- changes ----------------------------------------------------------------
    def add(self, entry_id: str, unit_ids: Sequence[str], texts: Sequence[str]) -> None:
        """Queue one entry's units; visible after :meth:`refresh`."""
        self._add_tokens([entry_id] * len(unit_ids), unit_ids, self.tokenize(texts))

    def _add_tokens(
        self, entry_ids: Sequence[str], unit_ids: Sequence[str], tokens: Sequence[list[str]]
    ) -> None:
        start = self.rows
        self._row_entry.extend(entry_ids)
        self._row_unit.extend(unit_ids)
        self._row_tokens.extend(tokens)
        self._live.extend([True] * len(entry_ids))
        for offset, entry_id in enumerate(entry_ids):
            self._rows_of_entry.setdefault(entry_id, []).append(start + offset)
        if len(entry_ids):
            self.stale = True

    def remove(self, entry_id: str) -> bool:
        """Mask an entry's rows (effective immediately); False if absent."""
        rows = self._rows_of_entry.pop(entry_id, None)
        if rows is None:
            return False
        for row in rows:
            self._live[row] = False
            if self._live_mask is not None and row < len(self._live_mask):
                self._live_mask[row] = 0.0
        return True

    def build(
        self, entry_ids: Sequence[str], unit_ids: Sequence[str], texts: Sequence[str]
    ) -> None:
        """Replace everything with these rows and index them."""
        self._row_entry, self._row_unit, self._row_tokens = [], [], []
        self._live, self._rows_of_entry = [], {}
        self._add_tokens(entry_ids, unit_ids, self.tokenize(texts))
        self.refresh()

    def refresh(self) -> None:
        """Drop dead rows and rebuild the BM25 matrix."""
        keep = [row for row, alive in enumerate(self._live) if alive]
        if len(keep) != self.rows:
            self._row_entry = [self._row_entry[r] for r in keep]
            self._row_unit = [self._row_unit[r] for r in keep]
            self._row_tokens = [self._row_tokens[r] for r in keep]
            self._live = [True] * len(keep)
            self._rows_of_entry = {}
            for row, entry_id in enumerate(self._row_entry):
                self._rows_of_entry.setdefault(entry_id, []).append(row)
        self._row_code = entry_codes(self._row_entry, {})
        if any(self._row_tokens):
            retriever = _bm25s().BM25(k1=self.settings.bm25_k1, b=self.settings.bm25_b)
            # A row without terms has length 0: its (unused) scores divide 0 by 0.
            with np.errstate(invalid="ignore", divide="ignore"):
                retriever.index(self._row_tokens, show_progress=False)
            self._retriever = retriever
            self._live_mask = np.ones(self.rows, dtype=np.float32)
        else:  # nothing indexed, or no row has a term: nothing can match
            self._retriever, self._live_mask = None, None
        self.stale = False

    # -- search -----------------------------------------------------------------
    def search(
        self,
        queries: Sequence[str],
        depth: int,
        skip: Sequence[frozenset[tuple[str, str]]] = (),
    ) -> list[RankedUnits]:
        """For each query, up to ``depth`` entries with a positive BM25 score, best first;
        ``skip[i]``: query i's ``(entry id, unit id)`` pairs to pass over."""
        if self.stale:
            raise RuntimeError("SparseIndex.refresh() must run after changes, before searching")
        results: list[RankedUnits] = []
        retriever, mask = self._retriever, self._live_mask
        skipped = list(skip) or [frozenset()] * len(queries)
        for tokens, passed_over in zip(self.tokenize(queries), skipped, strict=True):
            ids = retriever.get_tokens_ids(tokens) if retriever is not None else []
            if not ids:  # nothing indexed, or no query word occurs in the collection
                results.append(RankedUnits([], [], []))
                continue
            scores = retriever.get_scores(ids) * mask
            matched = np.flatnonzero(scores > 0)
            order = matched[np.argsort(-scores[matched], kind="stable")]
            if passed_over:
                kept = np.fromiter(
                    (
                        (self._row_entry[r], self._row_unit[r]) not in passed_over
                        for r in order.tolist()
                    ),
                    dtype=bool,
                    count=len(order),
                )
                order = order[kept]
            # Each entry's best row, found in numpy: a row-by-row walk in Python cost more
            # than BM25's scoring.
            best = order[first_row_per_entry(order, depth, self._row_code, self._row_entry)]
            rows = best.tolist()
            results.append(
                RankedUnits(
                    [self._row_entry[row] for row in rows],
                    [self._row_unit[row] for row in rows],
                    scores[best].tolist(),
                )
            )
        return results

    # -- snapshots ----------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Write the tokenised live rows into ``directory`` (the BM25 matrix is rebuilt)."""
        keep = [row for row, alive in enumerate(self._live) if alive]
        vocabulary: dict[str, int] = {}
        flat: list[int] = []
        offsets = [0]
        for row in keep:
            flat.extend(vocabulary.setdefault(t, len(vocabulary)) for t in self._row_tokens[row])
            offsets.append(len(flat))
        np.savez(
            directory / "sparse_rows.npz",
            entry=np.array([self._row_entry[r] for r in keep], dtype=str),
            unit=np.array([self._row_unit[r] for r in keep], dtype=str),
            tokens=np.array(flat, dtype=np.int32),
            offsets=np.array(offsets, dtype=np.int64),
        )
        (directory / "sparse_vocabulary.json").write_text(json.dumps(list(vocabulary)))

    @classmethod
    def load(cls, directory: Path, settings: RetrievalSettings) -> SparseIndex:
        """Read what :meth:`save` wrote and rebuild the BM25 matrix."""
        sparse = cls(settings)
        words = json.loads((directory / "sparse_vocabulary.json").read_text())
        data = np.load(directory / "sparse_rows.npz", allow_pickle=False)
        flat, offsets = data["tokens"].tolist(), data["offsets"].tolist()
        tokens = [[words[t] for t in flat[a:b]] for a, b in itertools.pairwise(offsets)]
        sparse._add_tokens([str(x) for x in data["entry"]], [str(x) for x in data["unit"]], tokens)
        sparse.refresh()
        return sparse
