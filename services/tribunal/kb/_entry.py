"""The knowledge-base entry: an answer, the question it answers, its supporting passages.

Plain frozen dataclasses: the gRPC adapters translate them to and from ``tribunal.v1``
messages (:mod:`tribunal.kb._wire`), the Ray deployments pickle them.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = [
    "ANSWER_UNIT_ID",
    "QUESTION_UNIT_ID",
    "Chunk",
    "KbEntry",
    "phrasing_index",
    "phrasing_unit_id",
    "self_sourced",
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


def phrasing_key(text: str) -> str:
    """A phrasing's identity: case and spacing normalised, so two phrasings (or a query and
    a phrasing) of the same words are one wherever the KB compares them."""
    return " ".join(text.split()).casefold()


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


_NOT_WORD = re.compile(r"\W+")


def _words(text: str) -> str:
    """The text's words only: a sentence splitter may drop the quotes and brackets around
    a sentence end (`?")` → `?`), and a chunk cut from an answer is still its own."""
    return _NOT_WORD.sub(" ", text.casefold()).strip()


def self_sourced(entry: KbEntry) -> bool:
    """True when the entry has no supporting documents: no chunk text at all, or only
    chunks cut from its own answer (each one occurs in the answer)."""
    return chunks_cut_from_answer(entry.answer, tuple(chunk.text for chunk in entry.chunks))


@functools.lru_cache(maxsize=4096)
def chunks_cut_from_answer(answer: str, chunk_texts: tuple[str, ...]) -> bool:
    """:func:`self_sourced` on an entry's texts: True when no chunk has text or each one
    occurs in the answer. Kept per texts: the gateway checks it for every self-evidenced
    hit of every query, and the same entries come back query after query."""
    texts = [_words(text) for text in chunk_texts if text.strip()]
    if not texts:
        return True
    words = f" {_words(answer)} "
    # Whole words: " covid 19 " is in the answer, "vid 1" is not.
    return all(f" {text} " in words for text in texts)
