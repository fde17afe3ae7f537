"""Sentence splitting and size-bounded packing of plain text.

Shared by retrieval (KB chunks) and entailment (premise chunks), so it lives in core
rather than in either service. Pieces are cut between sentences and hold at most
``max_chars`` characters; a sentence longer than the bound is cut at word boundaries,
and a single word longer than the bound is cut hard, so the bound always holds. Nothing
is repeated between pieces: joining them with spaces gives back the text with its
whitespace normalised.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ._errors import InvalidArgumentError

__all__ = ["pack_sentences", "split_sentences", "split_text"]

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


def pack_sentences(sentences: Sequence[str], *, max_chars: int) -> list[str]:
    """Pack consecutive sentences into pieces of at most ``max_chars`` characters.

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
    return texts


def split_text(text: str, *, max_chars: int) -> list[str]:
    """Split ``text`` into sentences and pack them; see :func:`pack_sentences`."""
    return pack_sentences(split_sentences(text), max_chars=max_chars)
