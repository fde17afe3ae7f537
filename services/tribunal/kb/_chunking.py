"""Sentence-aligned, size-bounded, non-overlapping KB chunks that keep the title.

Chunks are cut between sentences and hold at most ``max_chars`` characters of
passage text (the title is carried beside the text, not counted); the splitting
itself is :mod:`tribunal.core._text`, shared with the entailment service.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core import pack_sentences, split_sentences
from ._entry import Chunk

__all__ = ["chunk_sentences", "chunk_text"]


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
    texts = pack_sentences(sentences, max_chars=max_chars)
    return [Chunk(id=f"{id_prefix}{i}", text=t, title=title) for i, t in enumerate(texts)]


def chunk_text(
    text: str, *, title: str = "", max_chars: int, id_prefix: str = "chunk-"
) -> list[Chunk]:
    """Split ``text`` into sentences and pack them; see :func:`chunk_sentences`."""
    return chunk_sentences(
        split_sentences(text), title=title, max_chars=max_chars, id_prefix=id_prefix
    )
