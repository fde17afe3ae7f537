"""Labelled files an evaluation can score a given artifact on (``--data FILE``).

Four JSONL formats, one object per line (docs/evaluation.md, "Labelled files"):

- **relevance pairs** — ``{"query", "passage" (or "chunk" / "text"), "label": 0|1}``, or a
  graded ``"relevance"`` / ``"grade"`` (positive at ``--relevant-at``, default 2, the TREC
  DL convention); optional ``"id"`` (else ``qid:pid`` when both are given, else the line
  number) and ``"answers"``. The TREC DL judged-pairs files read as they are.
- **entailment pairs** — ``{"premise", "hypothesis", "label"}``, the label 0/1, a boolean or
  a name (``entailment``, ``entailed``, ``support``, ``supports``, ``supported`` are
  positive; any other name is negative); optional ``"id"``. SciFact's NLI pairs (``claim``,
  ``title``, ``evidence_text``, ``label``) and SICK (``sentence_A``, ``sentence_B``,
  ``entailment_label``) read as they are.
- **matching pairs** — ``{"query", "question", "answer", "label": 0|1}``: does the KB entry
  (question, answer) answer the query; optional ``"id"``, ``"group"`` (items of one group
  stay on one side of a split; default the query) and ``"source"``.
- **labelled traffic for a KB** — ``{"query", "answers": [ids of every entry that answers
  it; empty when none does]}``, the format ``tribunal calibrate`` reads; scored against a
  collection (``--collection``): its retrieved candidates become matching pairs.

Every problem is an :class:`InvalidArgumentError` naming the file, the line and what to fix.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tribunal.core import InvalidArgumentError, jsonl_rows

__all__ = [
    "ENTAILED_NAMES",
    "EntailmentPair",
    "FileKind",
    "MatchingPair",
    "RelevancePair",
    "TrafficQuery",
    "detect_kind",
    "read_entailment_pairs",
    "read_matching_pairs",
    "read_relevance_pairs",
    "read_traffic_queries",
]

FileKind = Literal["relevance", "entailment", "matching", "traffic"]
ENTAILED_NAMES = frozenset({"entailment", "entailed", "support", "supports", "supported"})


@dataclass(frozen=True)
class RelevancePair:
    id: str
    query: str
    passage: str
    label: int
    group: str
    answers: tuple[str, ...] = ()


@dataclass(frozen=True)
class EntailmentPair:
    """One labelled (premise, hypothesis) pair (positive: the premise entails it)."""

    id: str
    premise: str
    hypothesis: str
    label: int


@dataclass(frozen=True)
class MatchingPair:
    id: str
    query: str
    question: str
    answer: str
    label: int
    group: str
    source: str


@dataclass(frozen=True)
class TrafficQuery:
    id: str
    query: str
    answers: tuple[str, ...]


def _rows(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    if not path.is_file():
        raise InvalidArgumentError(f"--data {path}: no such file", field="data")
    for _, number, row in jsonl_rows(path, field="data"):
        yield number, row


def _text(row: Mapping[str, Any], keys: tuple[str, ...], where: str) -> str:
    for key in keys:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
    raise InvalidArgumentError(
        f"{where}: needs a non-empty {' or '.join(repr(k) for k in keys)}", field="data"
    )


def _binary(value: Any, where: str) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int | float) and value in (0, 1):
        return int(value)
    raise InvalidArgumentError(f"{where}: label must be 0 or 1, got {value!r}", field="data")


def detect_kind(path: Path) -> FileKind:
    """The format of ``path`` from its first record's keys."""
    for _, row in _rows(path):
        keys = set(row)
        if keys & {"premise", "hypothesis", "sentence_A", "evidence_text"}:
            return "entailment"
        if {"query", "question", "answer"} <= keys:
            return "matching"
        listed = isinstance(row.get("answers"), list)
        if "query" in keys and listed and not keys & {"label", "passage", "chunk", "text"}:
            return "traffic"
        if "query" in keys and keys & {"passage", "chunk", "text"}:
            return "relevance"
        raise InvalidArgumentError(
            f"{path}: cannot tell the format from the keys {sorted(keys)}; expected relevance "
            "pairs (query, passage, label), entailment pairs (premise, hypothesis, label), "
            "matching pairs (query, question, answer, label) or labelled traffic (query, "
            "answers) — docs/evaluation.md describes each",
            field="data",
        )
    raise InvalidArgumentError(f"{path} holds no records", field="data")


def _nonempty(items: list[Any], path: Path) -> None:
    if not items:
        raise InvalidArgumentError(f"{path} holds no records", field="data")
    labels = {getattr(item, "label", None) for item in items}
    if labels <= {0} or labels <= {1}:
        raise InvalidArgumentError(
            f"{path}: every item has label {labels.pop()}; an evaluation needs both classes",
            field="data",
        )


def read_relevance_pairs(path: Path, *, relevant_at: int = 2) -> list[RelevancePair]:
    pairs = []
    for number, row in _rows(path):
        where = f"{path} line {number}"
        query = _text(row, ("query",), where)
        passage = _text(row, ("passage", "chunk", "text"), where)
        if "label" in row:
            label = _binary(row["label"], where)
        elif isinstance(grade := row.get("relevance", row.get("grade")), int | float):
            label = int(float(grade) >= relevant_at)
        else:
            raise InvalidArgumentError(
                f"{where}: needs a label (0/1) or a graded relevance / grade", field="data"
            )
        qid, pid = row.get("qid", row.get("query_id")), row.get("pid", row.get("doc_id"))
        default = f"{qid}:{pid}" if qid is not None and pid is not None else f"line-{number}"
        answers = row.get("answers") or ()
        pairs.append(
            RelevancePair(
                id=str(row.get("id", default)),
                query=query,
                passage=passage,
                label=label,
                group=str(qid if qid is not None else query),
                answers=tuple(str(a) for a in answers),
            )
        )
    _nonempty(pairs, path)
    return pairs


def _entailment_label(row: Mapping[str, Any], where: str) -> int:
    value = row.get("label", row.get("entailment_label"))
    if isinstance(value, str):
        return int(value.strip().lower() in ENTAILED_NAMES)
    if value is None:
        raise InvalidArgumentError(f"{where}: needs a label", field="data")
    return _binary(value, where)


def read_entailment_pairs(path: Path) -> list[EntailmentPair]:
    pairs = []
    for number, row in _rows(path):
        where = f"{path} line {number}"
        if "claim" in row and "evidence_text" in row:  # SciFact's NLI pairs
            title = row.get("title") or ""
            premise = f"{title}\n{row['evidence_text']}" if title else str(row["evidence_text"])
            hypothesis = _text(row, ("claim",), where)
            default = f"{row.get('claim_id', number)}:{row.get('doc_id', '')}"
        elif "sentence_A" in row:  # SICK
            premise = _text(row, ("sentence_A",), where)
            hypothesis = _text(row, ("sentence_B",), where)
            default = str(row.get("pair_id", f"line-{number}"))
        else:
            premise = _text(row, ("premise",), where)
            hypothesis = _text(row, ("hypothesis",), where)
            default = f"line-{number}"
        pairs.append(
            EntailmentPair(
                id=str(row.get("id", default)),
                premise=premise,
                hypothesis=hypothesis,
                label=_entailment_label(row, where),
            )
        )
    _nonempty(pairs, path)
    ids = [p.id for p in pairs]
    if len(set(ids)) != len(ids):
        raise InvalidArgumentError(f"{path}: pair ids repeat; give each line its own id")
    return pairs


def read_matching_pairs(path: Path) -> list[MatchingPair]:
    pairs = []
    for number, row in _rows(path):
        where = f"{path} line {number}"
        query = _text(row, ("query",), where)
        if "label" not in row:
            raise InvalidArgumentError(f"{where}: needs a label (0/1)", field="data")
        pairs.append(
            MatchingPair(
                id=str(row.get("id", f"line-{number}")),
                query=query,
                question=_text(row, ("question",), where),
                answer=_text(row, ("answer",), where),
                label=_binary(row["label"], where),
                group=str(row.get("group") or query),
                source=str(row.get("source") or path.stem),
            )
        )
    _nonempty(pairs, path)
    return pairs


def read_traffic_queries(path: Path) -> list[TrafficQuery]:
    queries = []
    for number, row in _rows(path):
        where = f"{path} line {number}"
        answers = row.get("answers")
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InvalidArgumentError(
                f"{where}: answers must be a list of entry ids (empty when none answers)",
                field="data",
            )
        queries.append(
            TrafficQuery(
                id=str(row.get("id", f"line-{number}")),
                query=_text(row, ("query",), where),
                answers=tuple(answers),
            )
        )
    if not queries:
        raise InvalidArgumentError(f"{path} holds no records", field="data")
    return queries
