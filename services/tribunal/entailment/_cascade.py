"""The BITEM entailment cascade with MiniCheck's chunk-and-max scoring.

Per pair: stage 0 checks the quote (if one is given; a missing quote decides
the pair); the premise is cut into sentence-aligned chunks and the fast
checker scores every (chunk, hypothesis) — the pair's support is the max over
chunks; pairs whose fast support falls in the uncertain band go to the strong
checker, whose max then decides.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..core import InvalidArgumentError, ResourceExhaustedError, check_deadline, split_text
from ._checkers import SupportChecker, SupportScore
from ._quote import QuoteChecker, QuoteMatch

__all__ = [
    "CheckStage",
    "EntailmentCascade",
    "EntailmentLabel",
    "EntailmentVerdict",
    "PairToCheck",
    "PremiseChunk",
    "split_premise",
]


class EntailmentLabel(enum.Enum):
    ENTAILED = "entailed"
    NEUTRAL = "neutral"
    CONTRADICTED = "contradicted"
    QUOTE_NOT_FOUND = "quote_not_found"


class CheckStage(enum.Enum):
    QUOTE = "quote"
    FAST = "fast"
    STRONG = "strong"


@dataclass(frozen=True)
class PairToCheck:
    """One (premise, hypothesis) pair, optionally with the span it claims to quote."""

    premise: str
    hypothesis: str
    quote: str = ""


@dataclass(frozen=True)
class PremiseChunk:
    """A chunk of a premise: its index, text and character offset in the premise."""

    index: int
    text: str
    start: int


@dataclass(frozen=True)
class EntailmentVerdict:
    """The cascade's answer for one pair."""

    p_entail: float
    """Max over chunks of P(entail) from the deciding checker."""
    p_contradict: float | None
    """Max over chunks of P(contradict), when the deciding backend gives it."""
    label: EntailmentLabel
    decided_by: CheckStage
    supporting_chunk: PremiseChunk | None
    """The chunk with the highest support (None when the quote check decided)."""
    quote: QuoteMatch | None
    """Stage-0 result when a quote was given."""
    model: str
    """Model that decided ("" for the quote check)."""
    prompt_tokens: int = 0


@dataclass(frozen=True)
class _Decision:
    score: SupportScore
    chunk: PremiseChunk
    tokens: int


def split_premise(premise: str, max_chars: int) -> list[PremiseChunk]:
    """Sentence-aligned chunks of at most ``max_chars``, with their offsets in ``premise``."""
    chunks: list[PremiseChunk] = []
    position = 0
    for index, text in enumerate(split_text(premise, max_chars=max_chars)):
        # Chunk text is the premise's words joined by single spaces: find it again.
        pattern = r"\s*".join(re.escape(word) for word in text.split(" "))
        found = re.compile(pattern).search(premise, position)
        start = found.start() if found else -1
        position = found.end() if found else position
        chunks.append(PremiseChunk(index, text, start))
    return chunks


class EntailmentCascade:
    """Quote check, fast checker on every pair, strong checker on the uncertain ones.

    Args:
        fast: Stage-1 checker (every pair).
        strong: Stage-2 checker (pairs in the band), or None for a one-stage checker.
        uncertain_band: Stage-1 P(entail) in [low, high] goes to stage 2; below the band
            the fast checker's answer is "not entailed", above it "entailed".
        entail_threshold: P(entail) at or above which a pair is ENTAILED.
        contradict_threshold: P(contradict) at or above which a non-entailed pair
            is CONTRADICTED (backends without contradiction give NEUTRAL).
        chunk_size_chars: Premise chunk size bound (characters, sentence-aligned).
        quote_checker: Stage 0.
        max_pairs_per_request: Largest batch accepted.
        max_premise_chars: Longest premise accepted.
        max_hypothesis_chars: Longest hypothesis accepted.
    """

    def __init__(
        self,
        fast: SupportChecker,
        strong: SupportChecker | None = None,
        *,
        uncertain_band: tuple[float, float] = (0.2, 0.8),
        entail_threshold: float = 0.5,
        contradict_threshold: float = 0.5,
        chunk_size_chars: int = 2000,
        quote_checker: QuoteChecker | None = None,
        max_pairs_per_request: int = 256,
        max_premise_chars: int = 20_000,
        max_hypothesis_chars: int = 2_000,
    ) -> None:
        low, high = uncertain_band
        if not 0.0 <= low <= high <= 1.0:
            raise ValueError(f"uncertain_band needs 0 <= low <= high <= 1; got {uncertain_band}")
        self.fast = fast
        self.strong = strong
        self.uncertain_band = uncertain_band
        self.entail_threshold = entail_threshold
        self.contradict_threshold = contradict_threshold
        self.chunk_size_chars = chunk_size_chars
        self.quote_checker = quote_checker or QuoteChecker()
        self.max_pairs_per_request = max_pairs_per_request
        self.max_premise_chars = max_premise_chars
        self.max_hypothesis_chars = max_hypothesis_chars
        self.strong_calls_ = 0
        """Pairs sent to stage 2 since construction."""

    # -- request pipeline: validate -> quote -> fast -> strong -> label -------

    def validate(self, pairs: Sequence[PairToCheck]) -> None:
        """Raise a caller-facing error naming the first bad field."""
        if not pairs:
            raise InvalidArgumentError("send at least one pair", field="pairs")
        if len(pairs) > self.max_pairs_per_request:
            raise ResourceExhaustedError(
                f"{len(pairs)} pairs in one request; the limit is "
                f"{self.max_pairs_per_request}: split the batch"
            )
        for i, pair in enumerate(pairs):
            if not pair.premise.strip():
                raise InvalidArgumentError(
                    f"pairs[{i}].premise is empty: send the passage to check against",
                    field=f"pairs[{i}].premise",
                )
            if not pair.hypothesis.strip():
                raise InvalidArgumentError(
                    f"pairs[{i}].hypothesis is empty: send the claim to check",
                    field=f"pairs[{i}].hypothesis",
                )
            if len(pair.premise) > self.max_premise_chars:
                raise InvalidArgumentError(
                    f"pairs[{i}].premise has {len(pair.premise)} characters; the limit is "
                    f"{self.max_premise_chars}: send a shorter passage",
                    field=f"pairs[{i}].premise",
                )
            if len(pair.hypothesis) > self.max_hypothesis_chars:
                raise InvalidArgumentError(
                    f"pairs[{i}].hypothesis has {len(pair.hypothesis)} characters; the limit is "
                    f"{self.max_hypothesis_chars}",
                    field=f"pairs[{i}].hypothesis",
                )

    def check(
        self, pairs: Sequence[PairToCheck], *, fast_only: bool = False
    ) -> list[EntailmentVerdict]:
        """Verdicts in request order."""
        self.validate(pairs)
        quotes = [
            self.quote_checker.find(p.premise, p.quote) if p.quote.strip() else None for p in pairs
        ]
        todo = [i for i, q in enumerate(quotes) if q is None or q.found]
        chunks = {i: split_premise(pairs[i].premise, self.chunk_size_chars) for i in todo}
        check_deadline("the entailment check (before the fast checker)")
        fast = self._max_over_chunks(self.fast, pairs, todo, chunks)
        check_deadline("the entailment check (before the strong checker)")
        low, high = self.uncertain_band
        uncertain = [i for i in todo if low <= fast[i].score.p_entail <= high]
        strong: dict[int, _Decision] = {}
        if self.strong is not None and not fast_only and uncertain:
            strong = self._max_over_chunks(self.strong, pairs, uncertain, chunks)
            self.strong_calls_ += len(uncertain)
        verdicts = []
        for i, quote in enumerate(quotes):
            if quote is not None and not quote.found:
                verdicts.append(
                    EntailmentVerdict(
                        0.0,
                        None,
                        EntailmentLabel.QUOTE_NOT_FOUND,
                        CheckStage.QUOTE,
                        None,
                        quote,
                        "",
                    )
                )
                continue
            tokens = fast[i].tokens
            if i in strong and self.strong is not None:
                decision, stage, model = strong[i], CheckStage.STRONG, self.strong.model_id
                tokens += decision.tokens
            else:
                decision, stage, model = fast[i], CheckStage.FAST, self.fast.model_id
            verdicts.append(
                EntailmentVerdict(
                    p_entail=decision.score.p_entail,
                    p_contradict=decision.score.p_contradict,
                    label=self._label(decision.score, stage),
                    decided_by=stage,
                    supporting_chunk=decision.chunk,
                    quote=quote,
                    model=model,
                    prompt_tokens=tokens,
                )
            )
        return verdicts

    def _max_over_chunks(
        self,
        checker: SupportChecker,
        pairs: Sequence[PairToCheck],
        indices: Sequence[int],
        chunks: dict[int, list[PremiseChunk]],
    ) -> dict[int, _Decision]:
        flat = [(i, c) for i in indices for c in chunks[i]]
        scores = checker.score([(c.text, pairs[i].hypothesis) for i, c in flat])
        best: dict[int, _Decision] = {}
        contradict: dict[int, float] = {}
        tokens: dict[int, int] = {}
        for (i, chunk), score in zip(flat, scores, strict=True):
            tokens[i] = tokens.get(i, 0) + score.prompt_tokens
            if i not in best or score.p_entail > best[i].score.p_entail:
                best[i] = _Decision(score, chunk, 0)
            if score.p_contradict is not None:
                contradict[i] = max(contradict.get(i, 0.0), score.p_contradict)
        return {
            i: _Decision(
                SupportScore(d.score.p_entail, contradict.get(i), d.score.prompt_tokens),
                d.chunk,
                tokens[i],
            )
            for i, d in best.items()
        }

    def _label(self, score: SupportScore, stage: CheckStage) -> EntailmentLabel:
        low, high = self.uncertain_band
        # In a two-stage cascade the band edges are the fast checker's thresholds: a small
        # model's P(yes) is compressed (0.5B: 0.13-0.6 on SciFact), so its "yes" is
        # "above the band", not "above 0.5". A fast_only call in the band uses the
        # ordinary threshold.
        two_stage = self.strong is not None and stage is CheckStage.FAST
        if two_stage and not low <= score.p_entail <= high:
            entailed = score.p_entail > high
        else:
            entailed = score.p_entail >= self.entail_threshold
        if entailed:
            return EntailmentLabel.ENTAILED
        if score.p_contradict is not None and score.p_contradict >= self.contradict_threshold:
            return EntailmentLabel.CONTRADICTED
        return EntailmentLabel.NEUTRAL
