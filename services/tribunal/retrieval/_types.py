"""The knowledge-base model and the values searches take and return.

Plain frozen dataclasses: the gRPC adapter translates them to and from
``tribunal.v1`` messages, the Ray deployment pickles them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._verification import EntryVerification

__all__ = [
    "ANSWER_UNIT_ID",
    "QUESTION_UNIT_ID",
    "Chunk",
    "CollectionStats",
    "DeleteResult",
    "KbEntry",
    "SearchHit",
    "SearchMode",
    "SearchQuery",
    "SearchResult",
    "UpsertResult",
    "phrasing_index",
    "phrasing_unit_id",
]

QUESTION_UNIT_ID = "question"
"""``matched_chunk_id`` of a hit whose question text matched best."""
ANSWER_UNIT_ID = "answer"
"""``matched_chunk_id`` of a hit matched on its answer (entries without chunks only)."""
_PHRASING_PREFIX = QUESTION_UNIT_ID + ":"


def phrasing_unit_id(index: int) -> str:
    """The unit id of an entry's phrasing ``index`` (0: ``question``; i: ``questions[i-1]``,
    as ``question:i``)."""
    return QUESTION_UNIT_ID if index == 0 else f"{_PHRASING_PREFIX}{index}"


def phrasing_index(unit_id: str) -> int | None:
    """Which phrasing a unit id names (see :func:`phrasing_unit_id`); None for a chunk or
    the answer."""
    if unit_id == QUESTION_UNIT_ID:
        return 0
    suffix = unit_id.removeprefix(_PHRASING_PREFIX)
    if suffix != unit_id and suffix.isdigit() and suffix[0] != "0":
        return int(suffix)
    return None


@dataclass(frozen=True)
class Chunk:
    """A passage supporting an answer; keeps its document's title."""

    id: str
    """Unique within its entry."""
    text: str
    """The passage."""
    title: str = ""
    """Title of the document the passage comes from."""

    def indexed_text(self) -> str:
        """What the retrievers see: the title, then the passage."""
        return f"{self.title}\n{self.text}" if self.title else self.text


@dataclass(frozen=True)
class KbEntry:
    """One verified knowledge-base entry."""

    id: str
    """Caller-chosen, unique within a collection."""
    question: str = ""
    """The canonical question (empty for plain document corpora)."""
    answer: str = ""
    """The verified answer, returned verbatim."""
    metadata: Mapping[str, str] = field(default_factory=dict)
    """Source, language, review date, ..."""
    chunks: tuple[Chunk, ...] = ()
    """Supporting passages."""
    questions: tuple[str, ...] = ()
    """More phrasings of the same question (paraphrases users ask); searched like
    ``question``, and the entry is still one candidate with one answer."""

    def phrasings(self) -> tuple[str, ...]:
        """Every phrasing of the question: ``question`` first, then ``questions``; the
        index of one in this tuple is the one :func:`phrasing_unit_id` names."""
        return (self.question, *self.questions) if self.question.strip() else ()

    def search_units(self) -> list[tuple[str, str]]:
        """``(unit id, text)`` pairs the retrievers index for this entry.

        Every phrasing of the question (``question``, ``question:1``, ...) and each chunk;
        an entry with neither chunks nor question is indexed by its answer so that it can
        still be found.
        """
        units: list[tuple[str, str]] = [
            (phrasing_unit_id(i), text) for i, text in enumerate(self.phrasings()) if text.strip()
        ]
        units.extend((chunk.id, chunk.indexed_text()) for chunk in self.chunks if chunk.text)
        if not self.chunks and self.answer.strip():
            units.append((ANSWER_UNIT_ID, self.answer))
        return units


class SearchMode(enum.Enum):
    """Which retrievers take part."""

    HYBRID = "hybrid"
    DENSE = "dense"
    SPARSE = "sparse"


@dataclass(frozen=True)
class SearchQuery:
    """One search request."""

    collection: str
    text: str
    top_k: int = 10
    mode: SearchMode = SearchMode.HYBRID
    rerank: bool = False


@dataclass(frozen=True)
class SearchHit:
    """One entry in a result list, with how each retriever saw it."""

    entry: KbEntry
    score: float
    """Ordering score: fused RRF score, the retriever's own score in single mode,
    or the reranker probability for reranked hits."""
    rank: int
    """1-based position in the final list."""
    matched_unit_id: str
    """Chunk id, ``"question"``, ``"question:i"`` (the phrasing ``questions[i-1]``) or
    ``"answer"``: the unit that matched best."""
    dense_score: float | None = None
    dense_rank: int | None = None
    sparse_score: float | None = None
    sparse_rank: int | None = None
    rerank_score: float | None = None
    verification: EntryVerification | None = None
    """The entry's stored verification, the collection's policy applied (None: never
    verified, e.g. written before verification existed)."""


@dataclass(frozen=True)
class SearchResult:
    """Hits of one search, best first, and time per stage."""

    hits: tuple[SearchHit, ...]
    stage_milliseconds: Mapping[str, float] = field(default_factory=dict)
    """Stage name (embed, dense, sparse, fuse, rerank) to milliseconds."""
    kb_version: int = 0
    """The collection's version: the sequence number of its last change."""
    kb_content_version: str = ""
    """Content hash of the collection's entries (see ``Collection.content_version``)."""


@dataclass(frozen=True)
class UpsertResult:
    upserted: int
    """Entries written."""
    total_entries: int
    """Collection size after the write."""
    verdicts: Mapping[str, int] = field(default_factory=dict)
    """Entries of this write per verification verdict (``verified``, ``failed``, ...)."""
    cached: int = 0
    """Verifications answered from the verdict cache."""
    kb_version: int = 0
    """The collection's version (its change counter) once this write was applied."""


@dataclass(frozen=True)
class DeleteResult:
    deleted: int
    """Entries removed."""
    missing_ids: tuple[str, ...]
    """Requested ids that were not in the collection."""
    kb_version: int = 0
    """The collection's version (its change counter) once this delete was applied."""


@dataclass(frozen=True)
class CollectionStats:
    name: str
    entries: int
    chunks: int
    """Indexed search units (questions and chunks)."""
    index_type: str
    """FAISS index class, e.g. ``IndexFlatIP``."""
    dimension: int
    embedder: str
    gpu: bool
    load_error: str = ""
    """Why the collection could not be opened (empty when it serves)."""
