"""One retriever's list for one query: each entry's best unit, best first."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple, overload

__all__ = ["RankedUnits", "UnitMatch"]


class UnitMatch(NamedTuple):
    """One entry in a retriever's list: the best-scoring unit of that entry."""

    entry_id: str
    unit_id: str
    score: float
    vote: float | None = None
    """Dense only: the entry's share of the query's nearest units (``neighbour_votes``)."""


class RankedUnits(Sequence[UnitMatch]):
    """A retriever's list kept as parallel columns; a :class:`UnitMatch` is built only
    for a position that is read.

    Why columns: a search lists a hundred entries or more per retriever and keeps a head
    of a few after fusion, and building an object per listed entry cost more than the
    search's FAISS and BM25 work. Fusion reads :attr:`entry_ids` alone.
    """

    __slots__ = ("entry_ids", "scores", "unit_ids", "votes")

    def __init__(
        self,
        entry_ids: list[str],
        unit_ids: list[str],
        scores: list[float],
        votes: list[float] | None = None,
    ) -> None:
        if len(unit_ids) != len(entry_ids) or len(scores) != len(entry_ids):
            raise ValueError("entry_ids, unit_ids and scores must have the same length")
        if votes is not None and len(votes) != len(entry_ids):
            raise ValueError("votes must have one value per entry")
        self.entry_ids = entry_ids
        """Each listed entry's id, best first (each at most once)."""
        self.unit_ids = unit_ids
        """The unit of each entry that scored best."""
        self.scores = scores
        """That unit's score (cosine or BM25)."""
        self.votes = votes
        """Dense only: each entry's neighbour vote (None for a sparse list)."""

    @classmethod
    def of(cls, matches: Iterable[UnitMatch]) -> RankedUnits:
        """The list of these matches (all with votes, or none)."""
        listed = list(matches)
        votes = [m.vote for m in listed if m.vote is not None]
        return cls(
            [m.entry_id for m in listed],
            [m.unit_id for m in listed],
            [m.score for m in listed],
            votes if listed and len(votes) == len(listed) else None,
        )

    def __len__(self) -> int:
        return len(self.entry_ids)

    @overload
    def __getitem__(self, index: int) -> UnitMatch: ...

    @overload
    def __getitem__(self, index: slice) -> RankedUnits: ...

    def __getitem__(self, index: int | slice) -> UnitMatch | RankedUnits:
        votes = self.votes
        if isinstance(index, slice):
            return RankedUnits(
                self.entry_ids[index],
                self.unit_ids[index],
                self.scores[index],
                None if votes is None else votes[index],
            )
        return UnitMatch(
            self.entry_ids[index],
            self.unit_ids[index],
            self.scores[index],
            None if votes is None else votes[index],
        )

    def __iter__(self) -> Iterator[UnitMatch]:
        votes: Sequence[float | None] = (
            [None] * len(self.entry_ids) if self.votes is None else self.votes
        )
        for entry_id, unit_id, score, vote in zip(
            self.entry_ids, self.unit_ids, self.scores, votes, strict=True
        ):
            yield UnitMatch(entry_id, unit_id, score, vote)

    def __eq__(self, other: object) -> bool:
        # Equal to a list of the same matches, too: it stands where such lists stood.
        if isinstance(other, list | tuple):
            return list(self) == list(other)
        if not isinstance(other, RankedUnits):
            return NotImplemented
        return (self.entry_ids, self.unit_ids, self.scores, self.votes) == (
            other.entry_ids,
            other.unit_ids,
            other.scores,
            other.votes,
        )

    __hash__ = None  # type: ignore[assignment]  # mutable columns

    def __repr__(self) -> str:
        return f"RankedUnits({list(self)!r})"

    def position(self) -> dict[str, int]:
        """Each listed entry's 0-based place in the list."""
        return {entry_id: i for i, entry_id in enumerate(self.entry_ids)}
