"""Reading P(yes) off a next-token distribution.

P(yes) = Σp(yes variants) / (Σp(yes variants) + Σp(no variants)), the variants being
the case and leading-space spellings that are single tokens of the model's own
vocabulary ("Yes", " yes", "YES", ...). One forward pass, nothing sampled.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from .._errors import InternalError
from ._errors import MalformedOutputError

__all__ = ["YesNoTokens", "p_yes_from_logits", "p_yes_from_top_logprobs", "yes_no_spellings"]

_WORDS = {"yes": ("yes", "Yes", "YES"), "no": ("no", "No", "NO")}


def yes_no_spellings(word: str) -> tuple[str, ...]:
    """Case and leading-space spellings of ``yes`` or ``no``."""
    return tuple(prefix + form for form in _WORDS[word] for prefix in ("", " "))


@dataclass(frozen=True)
class YesNoTokens:
    """Token ids of the yes and no spellings in one model's vocabulary."""

    yes: tuple[int, ...]
    no: tuple[int, ...]

    @classmethod
    def from_tokenizer(cls, encode: Callable[[str], Sequence[int]]) -> YesNoTokens:
        """Keep the spellings that ``encode`` (no special tokens) maps to one token."""

        def single(word: str) -> tuple[int, ...]:
            ids = {tuple(encode(s)) for s in yes_no_spellings(word)}
            return tuple(sorted(t[0] for t in ids if len(t) == 1))

        tokens = cls(single("yes"), single("no"))
        if not tokens.yes or not tokens.no or set(tokens.yes) & set(tokens.no):
            raise InternalError(f"the tokenizer has no single-token yes/no spellings: {tokens}")
        return tokens


def p_yes_from_logits(logits: npt.NDArray[np.floating], tokens: YesNoTokens) -> tuple[float, float]:
    """(P(yes), yes+no probability mass) from one row of next-token logits."""
    row = np.asarray(logits, dtype=np.float64)
    top = float(row.max())
    # log-sum-exp over the whole vocabulary, stable in float64.
    log_z = top + math.log(float(np.exp(row - top).sum()))
    yes = float(np.exp(row[list(tokens.yes)] - log_z).sum())
    no = float(np.exp(row[list(tokens.no)] - log_z).sum())
    # The ratio is computed from log-space sums so that tiny masses do not underflow.
    log_yes = float(np.logaddexp.reduce(row[list(tokens.yes)]))
    log_no = float(np.logaddexp.reduce(row[list(tokens.no)]))
    p_yes = 1.0 / (1.0 + math.exp(log_no - log_yes))
    return p_yes, yes + no


def p_yes_from_top_logprobs(alternatives: Iterable[tuple[str, float]]) -> tuple[float, float]:
    """(P(yes), visible yes+no mass) from an API's ``top_logprobs`` (token text, logprob).

    Only the top alternatives are visible: a spelling outside them counts as zero
    (its probability is below the last listed one). When neither word is listed the
    model did not mean to answer yes or no, and no value is made up.

    Raises:
        MalformedOutputError: neither yes nor no is among the alternatives.
    """
    yes_forms, no_forms = set(yes_no_spellings("yes")), set(yes_no_spellings("no"))
    yes = no = 0.0
    seen: list[str] = []
    for text, logprob in alternatives:
        seen.append(text)
        if text in yes_forms:
            yes += math.exp(logprob)
        elif text in no_forms:
            no += math.exp(logprob)
    if yes + no == 0.0:
        raise MalformedOutputError(
            f"neither yes nor no among the top {len(seen)} next tokens ({seen[:5]}...)",
            attempts=1,
            outputs=seen[:1],
        )
    return yes / (yes + no), yes + no
