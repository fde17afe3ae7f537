"""Stage 0: does a quoted span occur in the premise, verbatim or nearly?

Both texts are normalised (Unicode NFKC, case-folded, typographic quotes and
dashes unified, punctuation dropped, whitespace collapsed) while keeping a map
from each normalised character back to the original text, so a match reports
offsets into the premise the caller sent. An exact normalised match scores
100; otherwise rapidfuzz's partial-ratio alignment finds the best window.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from rapidfuzz import fuzz

__all__ = ["QuoteChecker", "QuoteMatch", "normalise_with_offsets"]

_UNIFY = str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-", "—": "-"})


@dataclass(frozen=True)
class QuoteMatch:
    """Where (and how well) a quote matched; offsets index the original premise."""

    found: bool
    """``ratio`` reached the checker's threshold."""
    ratio: float
    """0..100 similarity of the best alignment (100: verbatim after normalisation)."""
    start: int
    """Start offset of the best alignment in the premise (-1 when nothing aligned)."""
    end: int
    """End offset (exclusive)."""


def normalise_with_offsets(text: str) -> tuple[str, list[int]]:
    """The normalised text and, per normalised character, its offset in ``text``."""
    chars: list[str] = []
    offsets: list[int] = []
    pending_space: int | None = None  # offset of the separator run awaiting its space
    for index, raw in enumerate(text):
        for char in unicodedata.normalize("NFKC", raw).translate(_UNIFY).casefold():
            category = unicodedata.category(char)
            if char.isspace() or category.startswith("P") or category.startswith("S"):
                # Punctuation and symbols act as word separators, like spaces.
                if chars and pending_space is None:
                    pending_space = index
                continue
            if pending_space is not None:
                chars.append(" ")
                offsets.append(pending_space)
                pending_space = None
            chars.append(char)
            offsets.append(index)
    return "".join(chars), offsets


class QuoteChecker:
    """Finds quotes in premises.

    Args:
        min_ratio: Smallest partial-ratio (0..100) that counts as found. 90
            tolerates a changed word or two in a sentence-length quote but not
            a paraphrase.
        min_quote_chars: Quotes shorter than this after normalisation must
            match exactly (fuzzy matching of very short strings is noise).
    """

    def __init__(self, min_ratio: float = 90.0, min_quote_chars: int = 12) -> None:
        if not 0 < min_ratio <= 100:
            raise ValueError("min_ratio must be in (0, 100]")
        self.min_ratio = min_ratio
        self.min_quote_chars = min_quote_chars

    def find(self, premise: str, quote: str) -> QuoteMatch:
        """Locate ``quote`` in ``premise``."""
        norm_premise, offsets = normalise_with_offsets(premise)
        norm_quote, _ = normalise_with_offsets(quote)
        if not norm_quote or not norm_premise:
            return QuoteMatch(False, 0.0, -1, -1)
        position = norm_premise.find(norm_quote)
        if position >= 0:
            return self._match(100.0, position, position + len(norm_quote), offsets)
        if len(norm_quote) < self.min_quote_chars:
            return QuoteMatch(False, 0.0, -1, -1)
        alignment = fuzz.partial_ratio_alignment(norm_quote, norm_premise)
        if alignment is None or alignment.dest_end <= alignment.dest_start:
            return QuoteMatch(False, 0.0, -1, -1)
        return self._match(alignment.score, alignment.dest_start, alignment.dest_end, offsets)

    def _match(self, ratio: float, start: int, end: int, offsets: list[int]) -> QuoteMatch:
        return QuoteMatch(
            found=ratio >= self.min_ratio,
            ratio=round(float(ratio), 2),
            start=offsets[start],
            end=offsets[end - 1] + 1,
        )
