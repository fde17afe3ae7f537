"""Attention checks of the review queue: items with a known answer (DREAM appendix F.2),
read from JSONL and served exactly like real items, so an annotator cannot tell them
apart; their votes are scored into a per-annotator accuracy (:mod:`._review_reports`).

A check can take the form of an audited fallback (``pick``): the annotator is asked which
entry, if any, answers the query, and passes by picking the right one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core import InvalidArgumentError, NotFoundError, jsonl_rows

__all__ = ["ATTENTION_PREFIX", "AttentionItem", "load_attention"]

ATTENTION_PREFIX = "attention:"


class _AttentionPick(BaseModel):
    """An attention check in the form of an audited fallback: which entry answers?"""

    model_config = ConfigDict(extra="forbid")

    collection: str = Field(min_length=1)
    candidates: list[str] = Field(default_factory=list)
    entry: str | None = None
    """The entry that answers the query; null: none does."""


class _AttentionLine(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    query: str = Field(min_length=1)
    chunk: str = Field(min_length=1)
    answers: list[str] = Field(default_factory=list)
    label: Literal["relevant", "irrelevant"]
    history: dict[str, Any] = Field(default_factory=dict)
    """Optional debate shown with the item (DREAM pairs each check with two arguments)."""
    pick: _AttentionPick | None = None
    """Shown as an audited fallback: the annotator picks the entry (``label`` relevant
    when ``pick.entry`` is set, irrelevant when none answers)."""

    @field_validator("label", mode="before")
    @classmethod
    def _label(cls, value: Any) -> Any:
        # qrels-style grades are accepted too: 1 (or any positive) relevant, 0 irrelevant.
        if isinstance(value, bool):
            return "relevant" if value else "irrelevant"
        if isinstance(value, int):
            return "relevant" if value > 0 else "irrelevant"
        return value.strip().lower() if isinstance(value, str) else value


@dataclass(frozen=True)
class AttentionItem:
    """An item with a known answer; its votes measure the annotator, not the item."""

    id: str
    query: str
    chunk: str
    label: str
    answers: tuple[str, ...] = ()
    history: dict[str, Any] = field(default_factory=dict)
    pick_entry: str | None = None
    """For a check shown as an audited fallback: the entry that answers ("" for none)."""

    @property
    def key(self) -> str:
        return f"{ATTENTION_PREFIX}{self.id}"


def load_attention(path: str | Path) -> list[AttentionItem]:
    """Read attention checks from JSONL: ``{"query", "chunk", "answers", "label"}`` per line.

    ``id`` defaults to the line number; ``history`` (a debate, as in escalations) is
    optional. Blank lines are skipped.
    """
    source = Path(path).expanduser()
    if not source.is_file():
        raise NotFoundError(f"--attention {source}: no such file")
    items: list[AttentionItem] = []
    seen: set[str] = set()
    for row in jsonl_rows(source, field="attention"):
        try:
            parsed = _AttentionLine.model_validate(row.value)
        except ValidationError as exc:
            raise InvalidArgumentError(
                f"{row.where}: not an attention item (need query, chunk, answers, "
                f"label relevant|irrelevant): {exc}",
                field="attention",
            ) from None
        item_id = parsed.id or str(row.number)
        history, pick_entry = parsed.history, None
        if parsed.pick is not None:
            pick_entry = parsed.pick.entry or ""
            if (parsed.label == "relevant") != bool(pick_entry):
                raise InvalidArgumentError(
                    f"{row.where}: a pick check's label is relevant with pick.entry set, "
                    "irrelevant with none",
                    field="attention",
                )
            history = {
                **history,
                "collection": parsed.pick.collection,
                "candidates": list(parsed.pick.candidates),
                "kb_entry_id": parsed.pick.candidates[0] if parsed.pick.candidates else "",
            }
        if item_id in seen:
            raise InvalidArgumentError(
                f"{row.where}: duplicate attention id {item_id!r}", field="attention"
            )
        seen.add(item_id)
        items.append(
            AttentionItem(
                id=item_id,
                query=parsed.query,
                chunk=parsed.chunk,
                label=parsed.label,
                answers=tuple(parsed.answers),
                history=history,
                pick_entry=pick_entry,
            )
        )
    return items
