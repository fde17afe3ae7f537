"""A labelling item, and what every input reader shares: its lines, its grades."""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import InvalidArgumentError, NotFoundError

__all__ = ["LabelItem", "parse_grade", "read_lines", "unknown_ids"]

_WORD_LABELS = {"relevant": 1, "irrelevant": 0, "true": 1, "false": 0, "yes": 1, "no": 0}


@dataclass(frozen=True)
class LabelItem:
    """One (query, chunk, answers) triple to label."""

    item_id: str
    query: str
    chunk: str
    answers: tuple[str, ...] = ()
    query_id: str = ""
    doc_id: str = ""
    gold: int | None = None
    """The input qrels' grade for the pair; None when they did not judge it (a hole)."""


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each non-blank line, without its newline."""
    if not path.is_file():
        raise NotFoundError(f"{path} does not exist")
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                yield number, line.rstrip("\n")


def parse_grade(value: Any, where: str) -> int | None:
    """A relevance grade from a number or a word (relevant, yes, true, ...); None when
    absent. ``where`` (file and line) goes into the error."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float):
        return int(value)
    text = str(value).strip().lower()
    if text in _WORD_LABELS:
        return _WORD_LABELS[text]
    try:
        return int(float(text))
    except ValueError:
        raise InvalidArgumentError(
            f"{where}: relevance {value!r} is neither a grade (0, 1, 2, ...) nor "
            "relevant/irrelevant",
            field="gold",
        ) from None


def unknown_ids(
    pairs: Iterable[tuple[str, str]], topics: Container[str], corpus: Container[str]
) -> tuple[list[str], list[str]]:
    """The query ids of ``pairs`` missing from ``topics`` and the document ids missing
    from ``corpus``, each sorted and distinct."""
    listed = list(pairs)
    return (
        sorted({qid for qid, _ in listed if qid not in topics}),
        sorted({docid for _, docid in listed if docid not in corpus}),
    )
