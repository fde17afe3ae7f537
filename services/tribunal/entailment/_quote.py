"""Stage 0: does a quoted span occur in the premise, verbatim or nearly?

Both texts are normalised (Unicode NFKC, case-folded, typographic quotes and
dashes unified, punctuation dropped, whitespace collapsed) while keeping a map
from each normalised character back to the original text, so a match reports
offsets into the premise the caller sent. An exact normalised match scores
100; otherwise rapidfuzz's partial-ratio alignment finds the best window.

Fuzzy alignment is bounded. Its cost grows with the square of the quote's length
(rapidfuzz, measured: 0.05 s at 1,000 characters, 0.5 s at 2,000, 7.5 s at 5,000, with
little dependence on the premise's length), so quotes longer than ``max_quote_chars``
are matched exactly only. And a linear-time prefilter picks where to align: it counts,
for every window of the premise as long as the quote, the quote's character 3-grams the
window holds, and only the best window and, of the next, those that hold enough 3-grams
to reach ``min_ratio`` (an alignment within ratio r differs by at most 2L(1 - r/100)
insertions and deletions, each destroying at most three 3-grams), up to ``max_windows``,
are aligned, each with a margin.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Any

import numpy as np
from rapidfuzz import fuzz

from ..core import check_deadline

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


_GRAM = 3
# Up to this length rapidfuzz aligns in one bit-parallel pass over the premise.
_SHORT_QUOTE = 64


def _gram_keys(text: str) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """Each character 3-gram of ``text`` as one integer (code points are < 2**21)."""
    points = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.uint64)
    if len(points) < _GRAM:
        return np.zeros(0, dtype=np.uint64)
    keys: np.ndarray[Any, np.dtype[np.uint64]] = (
        (points[:-2] << np.uint64(42)) | (points[1:-1] << np.uint64(21)) | points[2:]
    )
    return keys


class QuoteChecker:
    """Finds quotes in premises.

    Args:
        min_ratio: Smallest partial-ratio (0..100) that counts as found. 90
            tolerates a changed word or two in a sentence-length quote but not
            a paraphrase.
        min_quote_chars: Quotes shorter than this after normalisation must
            match exactly (fuzzy matching of very short strings is noise).
        max_quote_chars: Longer quotes (after normalisation) are matched exactly
            only (bounds the alignment work).
        max_windows: Premise windows aligned per quote (the prefilter's best).
    """

    def __init__(
        self,
        min_ratio: float = 90.0,
        min_quote_chars: int = 12,
        *,
        max_quote_chars: int = 1_000,
        max_windows: int = 2,
    ) -> None:
        if not 0 < min_ratio <= 100:
            raise ValueError("min_ratio must be in (0, 100]")
        if max_windows < 1:
            raise ValueError("max_windows must be >= 1")
        self.min_ratio = min_ratio
        self.min_quote_chars = min_quote_chars
        self.max_quote_chars = max_quote_chars
        self.max_windows = max_windows

    def find(self, premise: str, quote: str) -> QuoteMatch:
        """Locate ``quote`` in ``premise``."""
        check_deadline("the quote check")
        norm_premise, offsets = normalise_with_offsets(premise)
        norm_quote, _ = normalise_with_offsets(quote)
        if not norm_quote or not norm_premise:
            return QuoteMatch(False, 0.0, -1, -1)
        position = norm_premise.find(norm_quote)
        if position >= 0:
            return self._match(100.0, position, position + len(norm_quote), offsets)
        if not self.min_quote_chars <= len(norm_quote) <= self.max_quote_chars:
            return QuoteMatch(False, 0.0, -1, -1)
        best: tuple[float, int, int] | None = None
        for start, end in self._windows(norm_quote, norm_premise):
            check_deadline("the quote check")
            alignment = fuzz.partial_ratio_alignment(norm_quote, norm_premise[start:end])
            if alignment is None or alignment.dest_end <= alignment.dest_start:
                continue
            if best is None or alignment.score > best[0]:
                best = (alignment.score, start + alignment.dest_start, start + alignment.dest_end)
        if best is None:
            return QuoteMatch(False, 0.0, -1, -1)
        return self._match(*best, offsets)

    def _windows(self, quote: str, premise: str) -> list[tuple[int, int]]:
        """Regions of ``premise`` worth aligning ``quote`` in, best first (see above)."""
        length = len(quote)
        margin = length // 4  # room for the alignment to shift by insertions/deletions
        if length <= _SHORT_QUOTE or len(premise) <= self.max_windows * (length + 2 * margin):
            return [(0, len(premise))]
        hits = np.isin(_gram_keys(premise), _gram_keys(quote)).astype(np.int32)
        span = length - _GRAM + 1  # 3-grams starting inside a window of the quote's length
        totals = np.concatenate(([0], np.cumsum(hits)))
        counts = totals[span:] - totals[:-span]  # counts[j]: 3-grams of window j
        # Fewest shared 3-grams of a window within min_ratio (see the module docstring).
        indels = 2 * length * (1 - self.min_ratio / 100)
        needed = span - _GRAM * indels
        windows: list[tuple[int, int]] = []
        for j in np.argsort(-counts, kind="stable").tolist():
            if len(windows) == self.max_windows or (windows and counts[j] < needed):
                break
            if any(start <= j <= end - length for start, end in windows):
                continue  # inside a region already kept
            windows.append((max(0, j - margin), min(len(premise), j + length + margin)))
        return windows

    def _match(self, ratio: float, start: int, end: int, offsets: list[int]) -> QuoteMatch:
        return QuoteMatch(
            found=ratio >= self.min_ratio,
            ratio=round(float(ratio), 2),
            start=offsets[start],
            end=offsets[end - 1] + 1,
        )
