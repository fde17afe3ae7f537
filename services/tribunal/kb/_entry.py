"""The knowledge-base entry: an answer, the question it answers, its supporting passages.

Plain frozen dataclasses: the gRPC adapters translate them to and from ``tribunal.v1``
messages (:mod:`tribunal.kb._wire`), the Ray deployments pickle them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["ANSWER_UNIT_ID", "QUESTION_UNIT_ID", "Chunk", "KbEntry", "self_sourced"]

QUESTION_UNIT_ID = "question"
"""``matched_chunk_id`` of a hit whose question text matched best."""
ANSWER_UNIT_ID = "answer"
"""``matched_chunk_id`` of a hit matched on its answer (entries without chunks only)."""


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

    def search_units(self) -> list[tuple[str, str]]:
        """``(unit id, text)`` pairs the retrievers index for this entry.

        The question (if any) and each chunk; an entry with neither chunks nor
        question is indexed by its answer so that it can still be found.
        """
        units: list[tuple[str, str]] = []
        if self.question.strip():
            units.append((QUESTION_UNIT_ID, self.question))
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
    texts = [_words(chunk.text) for chunk in entry.chunks if chunk.text.strip()]
    if not texts:
        return True
    answer = f" {_words(entry.answer)} "
    # Whole words: " covid 19 " is in the answer, "vid 1" is not.
    return all(f" {text} " in answer for text in texts)
