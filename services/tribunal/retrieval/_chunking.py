"""Sentence-aligned, size-bounded, non-overlapping chunking that keeps the title.

Chunks are cut between sentences and hold at most ``max_chars`` characters
of passage text (the title is carried beside the text, not counted). A single
sentence longer than the bound is cut at word boundaries, and a single word
longer than the bound is cut hard, so the bound always holds. Nothing is
repeated between chunks: joining them with spaces gives back the text with
its whitespace normalised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..core import InvalidArgumentError
from ._types import Chunk

__all__ = ["chunk_sentences", "chunk_text", "split_sentences"]

# A sentence ends at . ! or ? (and any closing quotes/brackets) followed by
# whitespace and something that can start a sentence. Blank lines end a
# sentence too, whatever precedes them.
_SENTENCE_END = re.compile(r"""(?<=[.!?])["'”’)\]]*\s+(?=["'“‘(\[]?[A-Z0-9])""")
_PARAGRAPH = re.compile(r"\n\s*\n")
# Abbreviations whose period does not end a sentence (lower-cased, with the period).
_ABBREVIATIONS = frozenset(
    {"e.g.", "i.e.", "etc.", "vs.", "dr.", "mr.", "mrs.", "ms.", "prof.", "al.", "fig.",
     "no.", "approx.", "st.", "jr.", "sr.", "inc.", "ltd.", "co.", "u.s.", "u.k."}
)  # fmt: skip
_WHITESPACE = re.compile(r"\s+")


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences (whitespace inside each one normalised)."""
    sentences: list[str] = []
    for paragraph in _PARAGRAPH.split(text):
        start = 0
        pending = ""
        for match in _SENTENCE_END.finditer(paragraph):
            piece = paragraph[start : match.start()]
            start = match.end()
            last_word = piece.rsplit(None, 1)[-1].lower() if piece.split() else ""
            if last_word in _ABBREVIATIONS:
                pending += piece + " "
                continue
            sentences.append(pending + piece)
            pending = ""
        sentences.append(pending + paragraph[start:])
    return [s for s in (_WHITESPACE.sub(" ", s).strip() for s in sentences) if s]


def _bounded_pieces(sentence: str, max_chars: int) -> Iterable[str]:
    """The sentence itself, or word-aligned pieces of it when it is too long."""
    if len(sentence) <= max_chars:
        yield sentence
        return
    piece = ""
    for word in sentence.split(" "):
        rest = word
        while len(rest) > max_chars:  # one word longer than a chunk: cut it
            if piece:
                yield piece
                piece = ""
            yield rest[:max_chars]
            rest = rest[max_chars:]
        if piece and len(piece) + 1 + len(rest) > max_chars:
            yield piece
            piece = rest
        else:
            piece = f"{piece} {rest}" if piece else rest
    if piece:
        yield piece


def chunk_sentences(
    sentences: Sequence[str], *, title: str = "", max_chars: int, id_prefix: str = "chunk-"
) -> list[Chunk]:
    """Pack consecutive sentences into chunks of at most ``max_chars`` characters.

    Args:
        sentences: The document's sentences, in order.
        title: Document title, kept on every chunk.
        max_chars: Bound on each chunk's text (title excluded).
        id_prefix: Chunk ids are ``f"{id_prefix}{i}"``, i = 0, 1, ...

    Raises:
        InvalidArgumentError: ``max_chars`` is not positive.
    """
    if max_chars < 1:
        raise InvalidArgumentError(f"max_chars must be >= 1; got {max_chars}", field="max_chars")
    texts: list[str] = []
    current = ""
    for sentence in sentences:
        normalised = _WHITESPACE.sub(" ", sentence).strip()
        for piece in _bounded_pieces(normalised, max_chars) if normalised else ():
            if current and len(current) + 1 + len(piece) > max_chars:
                texts.append(current)
                current = piece
            else:
                current = f"{current} {piece}" if current else piece
    if current:
        texts.append(current)
    return [Chunk(id=f"{id_prefix}{i}", text=t, title=title) for i, t in enumerate(texts)]


def chunk_text(
    text: str, *, title: str = "", max_chars: int, id_prefix: str = "chunk-"
) -> list[Chunk]:
    """Split ``text`` into sentences and pack them; see :func:`chunk_sentences`."""
    return chunk_sentences(
        split_sentences(text), title=title, max_chars=max_chars, id_prefix=id_prefix
    )
