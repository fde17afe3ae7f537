"""The signals one candidate carries into the confidence service, and their validation.

:class:`Signals` mirrors ``tribunal.v1.Signals``: every field is optional, and a
stage that did not run leaves its field ``None`` (missing), never zero. Judges and
extras are open-ended names; the fixed fields are the proto's schema.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from ..core import InvalidArgumentError

__all__ = ["PROBABILITY_FIELDS", "SCALAR_FIELDS", "SIGNAL_FIELDS", "DebateOutcome", "Signals"]


class DebateOutcome(enum.StrEnum):
    """How the debate ended (``None`` on :class:`Signals` when it did not run)."""

    AGREED_RELEVANT = "agreed_relevant"
    AGREED_IRRELEVANT = "agreed_irrelevant"
    DISAGREED = "disagreed"


# The proto's field names, in proto order: the names a JSONL row may use.
SIGNAL_FIELDS: tuple[str, ...] = (
    "retrieval_score",
    "retrieval_rank",
    "dense_score",
    "sparse_score",
    "judge_p_yes",
    "ensemble_p_match",
    "entailment_p_entail",
    "entailment_p_contradict",
    "supporting_passages",
    "debate",
    "debate_rounds",
    "extra",
    "ensemble_p_match_margin",
    "neighbour_vote",
)
SCALAR_FIELDS: tuple[str, ...] = tuple(
    name for name in SIGNAL_FIELDS if name not in ("judge_p_yes", "debate", "extra")
)
"""The optional single-number signals, in proto order."""
PROBABILITY_FIELDS: tuple[str, ...] = (
    "ensemble_p_match",
    "entailment_p_entail",
    "entailment_p_contradict",
)
_SCORE_FIELDS = ("retrieval_score", "dense_score", "sparse_score")
_MARGIN_FIELDS = ("ensemble_p_match_margin",)
_SHARE_FIELDS = ("neighbour_vote",)
"""Shares in [0, 1] that are not probabilities (a calibrator reads them as they are)."""
_COUNT_FIELDS = ("retrieval_rank", "supporting_passages", "debate_rounds")


def _finite(value: float, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"{where} must be a number, got {value!r}", field=where)
    number = float(value)
    if not math.isfinite(number):
        raise InvalidArgumentError(f"{where} must be finite, got {number}", field=where)
    return number


def _probability(value: float, where: str) -> float:
    number = _finite(value, where)
    if not 0.0 <= number <= 1.0:
        raise InvalidArgumentError(
            f"{where} must be a probability in [0, 1], got {number}", field=where
        )
    return number


def _margin(value: float, where: str) -> float:
    number = _finite(value, where)
    if not -1.0 <= number <= 1.0:
        raise InvalidArgumentError(
            f"{where} must be a difference of probabilities in [-1, 1], got {number}",
            field=where,
        )
    return number


def _count(value: int, where: str, minimum: int) -> int:
    number = _finite(value, where)
    if not number.is_integer() or number < minimum:
        raise InvalidArgumentError(
            f"{where} must be an integer >= {minimum}, got {value!r}", field=where
        )
    return int(number)


def _names(mapping: Mapping[str, float], where: str, check: Any) -> Mapping[str, float]:
    if not isinstance(mapping, Mapping):
        raise InvalidArgumentError(f"{where} must be a mapping of name to number", field=where)
    out: dict[str, float] = {}
    for name, value in mapping.items():
        if not isinstance(name, str) or not name.strip():
            raise InvalidArgumentError(f"{where} has an empty or non-text name", field=where)
        out[name] = check(value, f"{where}[{name}]")
    return MappingProxyType(out)


@dataclass(frozen=True)
class Signals:
    """Everything the pipeline measured about one candidate; ``None`` = the stage did not run.

    Construction validates: probabilities in [0, 1], every number finite, ranks
    >= 1, counts >= 0. A violation raises :class:`~tribunal.core.InvalidArgumentError`
    whose ``field`` names the signal (``signals.judge_p_yes[strong]``).
    """

    retrieval_score: float | None = None
    """Fused retrieval score of the candidate."""
    retrieval_rank: int | None = None
    """1-based rank of the candidate in the retrieval list."""
    dense_score: float | None = None
    """Dense cosine similarity."""
    sparse_score: float | None = None
    """BM25 score."""
    judge_p_yes: Mapping[str, float] = field(default_factory=dict)
    """P(yes) of each judge, keyed by judge name; a judge that did not vote is absent."""
    ensemble_p_match: float | None = None
    """The ensemble's aggregated P(match)."""
    entailment_p_entail: float | None = None
    """Max P(entail) over the candidate's supporting chunks."""
    entailment_p_contradict: float | None = None
    """P(contradict) when the entailment backend gives it."""
    supporting_passages: int | None = None
    """Number of distinct supporting passages that entail the answer."""
    debate: DebateOutcome | None = None
    """Debate outcome."""
    debate_rounds: int | None = None
    """Rounds the debate took."""
    extra: Mapping[str, float] = field(default_factory=dict)
    """Further named signals (finite numbers); names must be known to the calibrator."""
    ensemble_p_match_margin: float | None = None
    """P(match) of this candidate minus the best other candidate's, in [-1, 1]."""
    neighbour_vote: float | None = None
    """The candidate's answer's share of the query's nearest KB search units, in [0, 1]."""

    def __post_init__(self) -> None:
        # Frozen: normalised values are written once, here.
        def put(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        for name in _SCORE_FIELDS:
            value = getattr(self, name)
            if value is not None:
                put(name, _finite(value, f"signals.{name}"))
        for name in PROBABILITY_FIELDS:
            value = getattr(self, name)
            if value is not None:
                put(name, _probability(value, f"signals.{name}"))
        for name in _SHARE_FIELDS:
            value = getattr(self, name)
            if value is not None:
                put(name, _probability(value, f"signals.{name}"))
        for name in _MARGIN_FIELDS:
            value = getattr(self, name)
            if value is not None:
                put(name, _margin(value, f"signals.{name}"))
        for name in _COUNT_FIELDS:
            value = getattr(self, name)
            if value is not None:
                put(name, _count(value, f"signals.{name}", 1 if name == "retrieval_rank" else 0))
        if self.debate is not None and not isinstance(self.debate, DebateOutcome):
            put("debate", _debate(self.debate))
        put("judge_p_yes", _names(self.judge_p_yes, "signals.judge_p_yes", _probability))
        put("extra", _names(self.extra, "signals.extra", _finite))

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Signals:
        """Build from a JSON object keyed by the proto's field names (``None`` = missing).

        Raises:
            InvalidArgumentError: an unknown key or an invalid value; ``field`` names it.
        """
        if not isinstance(data, Mapping):
            raise InvalidArgumentError("signals must be a JSON object", field="signals")
        unknown = sorted(set(data) - set(SIGNAL_FIELDS))
        if unknown:
            raise InvalidArgumentError(
                f"unknown signal {unknown[0]!r}; known: {', '.join(SIGNAL_FIELDS)} "
                "(put other named signals under 'extra')",
                field=f"signals.{unknown[0]}",
            )
        values = {k: v for k, v in data.items() if v is not None}
        return cls(**values)

    def to_mapping(self) -> dict[str, Any]:
        """The present signals as a JSON-ready object (missing ones left out)."""
        out: dict[str, Any] = {}
        for name in SIGNAL_FIELDS:
            value = getattr(self, name)
            if name in ("judge_p_yes", "extra"):
                if value:
                    out[name] = dict(value)
            elif value is not None:
                out[name] = str(value) if name == "debate" else value
        return out


def _debate(value: object) -> DebateOutcome:
    try:
        return DebateOutcome(str(value).lower())
    except ValueError:
        known = ", ".join(d.value for d in DebateOutcome)
        raise InvalidArgumentError(
            f"signals.debate must be one of {known} (or absent), got {value!r}",
            field="signals.debate",
        ) from None
