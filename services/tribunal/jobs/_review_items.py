"""What the annotator sees: a review item (an open escalation or an attention check) and
the page's view of it — the passage with the debate's quotes marked, and the rounds.
Nothing in the view says whether the item is an attention check.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..core.storage import EscalationRow
from ._review_attention import AttentionItem
from ._review_audit import is_audited_fallback

__all__ = [
    "LABELS",
    "Highlight",
    "ReviewItem",
    "debate_rounds",
    "evidence_quotes",
    "highlight",
    "item_view",
]

LABELS: tuple[str, ...] = ("relevant", "irrelevant")


@dataclass(frozen=True)
class Highlight:
    """The passage cut into segments; ``marked`` segments are cited quotes."""

    segments: tuple[tuple[str, bool], ...]
    missing: tuple[str, ...]
    """Quotes that do not occur in the passage (the agent misquoted or paraphrased)."""


def highlight(chunk: str, quotes: Iterable[str]) -> Highlight:
    """Mark every case-insensitive exact occurrence of each quote; overlaps merge."""
    spans: list[tuple[int, int]] = []
    missing: list[str] = []
    for quote in quotes:
        # re with IGNORECASE keeps offsets into the original text (str.lower() can
        # change a string's length, e.g. for "İ").
        found = [m.span() for m in re.finditer(re.escape(quote), chunk, re.IGNORECASE)]
        if found:
            spans.extend(found)
        else:
            missing.append(quote)
    merged: list[list[int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    segments: list[tuple[str, bool]] = []
    position = 0
    for start, end in merged:
        if start > position:
            segments.append((chunk[position:start], False))
        segments.append((chunk[start:end], True))
        position = end
    if position < len(chunk) or not segments:
        segments.append((chunk[position:], False))
    return Highlight(segments=tuple(segments), missing=tuple(missing))


def _label_name(value: Any) -> str:
    text = str(value or "").removeprefix("LABEL_").lower()
    return text if text in LABELS else ""


def debate_rounds(history: Any) -> list[dict[str, Any]]:
    """The debate of an escalation (``MessageToDict`` of a DebateResult) as plain rounds.

    Tolerant of any JSON: escalations from the answer path carry no debate, and
    anything that is not a round or a turn is left out.
    """
    rounds = history.get("rounds") if isinstance(history, dict) else None
    if not isinstance(rounds, list):
        return []
    result: list[dict[str, Any]] = []
    for index, entry in enumerate(rounds, start=1):
        if not isinstance(entry, dict):
            continue
        turns = [
            {
                "agent": str(turn.get("agent", "")),
                "model": str(turn.get("model", "")),
                "label": _label_name(turn.get("label")),
                "evidence": str(turn.get("evidence", "")),
                "rationale": str(turn.get("rationale", "")),
                "evidence_found": bool(turn.get("evidence_found", False)),
            }
            for turn in entry.get("turns", [])
            if isinstance(turn, dict)
        ]
        number = entry.get("number", index)
        result.append({"number": number if isinstance(number, int) else index, "turns": turns})
    return result


def evidence_quotes(history: Any) -> list[str]:
    """The distinct non-empty evidence quotes of the debate, in order of appearance."""
    quotes: list[str] = []
    for round_ in debate_rounds(history):
        for turn in round_["turns"]:
            quote = turn["evidence"].strip()
            if quote and quote not in quotes:
                quotes.append(quote)
    return quotes


@dataclass(frozen=True)
class ReviewItem:
    """One item to label; ``token`` is all the browser learns about its identity."""

    key: str
    token: str
    query: str
    chunk: str
    answers: tuple[str, ...]
    history: dict[str, Any]
    is_attention: bool = False
    expected_label: str | None = None
    audit_id: str = ""
    """Set on an audited fallback: the decision whose candidates the page offers."""


def item_view(item: ReviewItem) -> dict[str, Any]:
    """The JSON the page renders. Nothing in it says whether the item is an attention check."""
    marked = highlight(item.chunk, evidence_quotes(item.history))
    outcome = item.history.get("outcome", "") if isinstance(item.history, dict) else ""
    return {
        "item": item.token,
        "query": item.query,
        "answers": list(item.answers),
        "passage": [{"text": text, "mark": mark} for text, mark in marked.segments],
        "missing_quotes": list(marked.missing),
        "rounds": debate_rounds(item.history),
        "outcome": str(outcome).removeprefix("DEBATE_OUTCOME_").lower(),
    }


def _attention_token(item: AttentionItem) -> str:
    # Same shape as an escalation id (32 hex digits), so the token gives nothing away.
    return hashlib.sha256(item.key.encode()).hexdigest()[:32]


def _escalation_item(row: EscalationRow) -> ReviewItem:
    return ReviewItem(
        key=row.id,
        token=row.id,
        query=row.query,
        chunk=row.chunk,
        answers=tuple(row.answers),
        history=row.history if isinstance(row.history, dict) else {},
        audit_id=row.audit_id or "" if is_audited_fallback(row) else "",
    )


def _attention_item(item: AttentionItem) -> ReviewItem:
    return ReviewItem(
        key=item.key,
        token=_attention_token(item),
        query=item.query,
        chunk=item.chunk,
        answers=item.answers,
        history=item.history,
        is_attention=True,
        expected_label=item.label,
        # A pick check asks as an audited fallback does; its token stands for the audit id.
        audit_id=_attention_token(item) if item.pick_entry is not None else "",
    )
