"""The values searches and writes take and return (the entries themselves: :mod:`tribunal.kb`).

Plain frozen dataclasses: the gRPC adapter translates them to and from
``tribunal.v1`` messages, the Ray deployment pickles them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..kb import KbEntry

if TYPE_CHECKING:
    from ._signing import SignedRecord
    from ._verification import EntryVerification

__all__ = [
    "CollectionStats",
    "DeleteResult",
    "SearchHit",
    "SearchMode",
    "SearchQuery",
    "SearchResult",
    "SignResult",
    "UpsertResult",
]


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
    leave_out_own_phrasing: bool = False
    """Pass over the entries' added phrasings with the query's words, as if the KB had not
    been taught this query: the signals it would get as a new query (``tribunal calibrate``
    on the queries a tune taught). An entry's question is never left out."""


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
    neighbour_vote: float | None = None
    """The entry's share, in [0, 1], of the query's ``vote_neighbours`` nearest search units,
    weighted by cosine (None: the dense retriever did not run)."""
    verification: EntryVerification | None = None
    """The entry's stored verification, the collection's policy applied (None: never
    verified, e.g. written before verification existed)."""
    served: SignedRecord | None = None
    """The KB writer's signed served record of this entry version (None: not signed)."""


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
    signed_head: SignedRecord | None = None
    """The KB writer's newest signed record of the collection's version (None: never
    signed). ``kb_version`` and ``kb_content_version`` are that record's."""
    retrieval_model: str = ""
    """The model whose vectors the collection's dense search compared: the profile's
    embedder as ``<artifact>@<12 hex of its sha256>``, or ``tuned:<tm-version>`` for a
    collection re-embedded with its tuned matcher's model. Calibrations are bound to it."""


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
    to_sign: tuple[bytes, ...] = ()
    """Served records of this write and the collection head, for a writer that signs
    them itself (empty when the knowledge base signed them with its own signer)."""


@dataclass(frozen=True)
class DeleteResult:
    deleted: int
    """Entries removed."""
    missing_ids: tuple[str, ...]
    """Requested ids that were not in the collection."""
    kb_version: int = 0
    """The collection's version (its change counter) once this delete was applied."""
    to_sign: tuple[bytes, ...] = ()
    """The collection head's record, for a writer that signs it itself."""


@dataclass(frozen=True)
class SignResult:
    """What storing signed records did."""

    stored: int
    """Records stored (entries and the head)."""
    stale: int
    """Records that no longer describe the collection (rewritten since): not stored."""


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
