"""Labelling inputs: JSONL items, a BEIR folder, TREC topics + run (+ qrels)
(:mod:`._ir_inputs`), read into items and held to the pipeline's limits.

Every reader returns :class:`LabelItem` s in input order, each with a stable
``item_id`` (``qid:docid`` when the input names the query and the document, the row's
``item_id``/``id`` when it has one, else a hash of its text), so a resumed job finds the
same items under the same keys. A pair the input's qrels judged carries that grade as
``gold``; a pair they did not judge (``gold`` None) is a hole the job fills.

:func:`check_items` holds every item to the limits ``Gateway.Label`` enforces (query,
chunk and answer lengths, answers per item, id length), so that an item the pipeline
would refuse is recorded as failed, with the reason, when the job is created, instead of
stopping the job at every resume.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..core import InvalidArgumentError, jsonl_rows
from ._ir_inputs import read_beir, read_trec
from ._items import LabelItem, parse_grade

if TYPE_CHECKING:
    from ..core import Settings

__all__ = [
    "JSONL_FIELDS",
    "InputSpec",
    "ItemLimits",
    "check_items",
    "detect_format",
    "read_items",
    "read_jsonl",
]

InputFormat = Literal["jsonl", "beir", "trec"]

JSONL_FIELDS: dict[str, tuple[str, ...]] = {
    "item_id": ("item_id", "id"),
    "query": ("query", "question"),
    "chunk": ("chunk", "passage", "text", "document"),
    "answers": ("answers",),
    "query_id": ("query_id", "qid"),
    "doc_id": ("doc_id", "docid", "pid", "corpus_id"),
    "gold": ("gold", "relevance", "label"),
}
"""Item field -> the JSONL keys read for it, first present wins (TREC DL 2019's judged
pairs, ``qid, query, pid, passage, relevance``, read as they are)."""


@dataclass(frozen=True)
class InputSpec:
    """Where a job's items come from (stored with the job as its description)."""

    path: Path
    """JSONL file, BEIR folder, or TREC topics file."""
    format: InputFormat
    run: Path | None = None
    """TREC run of candidates (``qid Q0 docid rank score tag``): BEIR and TREC."""
    qrels: Path | None = None
    """TREC qrels: which pairs are already judged (TREC; BEIR finds its own)."""
    corpus: Path | None = None
    """Passage texts of a TREC input: ``docid<TAB>text`` TSV or BEIR-style JSONL."""
    depth: int | None = None
    """Candidates per query taken from the run (its top ``depth`` by rank); None: all."""
    split: str = "test"
    """BEIR qrels split (``qrels/<split>.tsv``)."""
    fields: Mapping[str, str] = field(default_factory=dict)
    """JSONL: item field -> key, overriding :data:`JSONL_FIELDS`."""

    def describe(self) -> dict[str, Any]:
        """JSON-able description (the job row keeps it; a resume re-reads the same input)."""
        return {
            "path": str(self.path),
            "format": self.format,
            "run": str(self.run) if self.run else None,
            "qrels": str(self.qrels) if self.qrels else None,
            "corpus": str(self.corpus) if self.corpus else None,
            "depth": self.depth,
            "split": self.split,
            "fields": dict(self.fields),
        }

    @classmethod
    def from_description(cls, data: Mapping[str, Any]) -> InputSpec:
        def path(key: str) -> Path | None:
            return Path(data[key]) if data.get(key) else None

        return cls(
            path=Path(data["path"]),
            format=data["format"],
            run=path("run"),
            qrels=path("qrels"),
            corpus=path("corpus"),
            depth=data.get("depth"),
            split=data.get("split") or "test",
            fields=dict(data.get("fields") or {}),
        )


@dataclass(frozen=True)
class ItemLimits:
    """What ``Gateway.Label`` accepts of one item (its settings; see :func:`check_items`)."""

    max_id_chars: int = 128
    max_query_chars: int = 2_000
    max_chunk_chars: int = 20_000
    max_answers_per_item: int = 16
    max_answer_chars: int = 2_000

    @classmethod
    def from_settings(cls, settings: Settings) -> ItemLimits:
        gateway = settings.gateway
        return cls(
            max_id_chars=settings.server.max_id_chars,
            max_query_chars=gateway.max_query_chars,
            max_chunk_chars=gateway.max_chunk_chars,
            max_answers_per_item=gateway.max_answers_per_item,
            max_answer_chars=gateway.max_answer_chars,
        )

    def problem(self, item: LabelItem) -> str | None:
        """Why the pipeline would refuse ``item`` (None: it would not)."""
        texts = (
            ("item_id", item.item_id, self.max_id_chars, "server.max_id_chars"),
            ("query", item.query, self.max_query_chars, "gateway.max_query_chars"),
            ("chunk", item.chunk, self.max_chunk_chars, "gateway.max_chunk_chars"),
        )
        for name, text, limit, setting in texts:
            if name != "item_id" and not text.strip():
                return f"{name} is empty"
            if len(text) > limit:
                return f"{name} has {len(text)} characters; the limit is {limit} ({setting})"
        if len(item.answers) > self.max_answers_per_item:
            return (
                f"answers has {len(item.answers)} entries; the limit is "
                f"{self.max_answers_per_item} (gateway.max_answers_per_item)"
            )
        for i, answer in enumerate(item.answers):
            if len(answer) > self.max_answer_chars:
                return (
                    f"answers[{i}] has {len(answer)} characters; the limit is "
                    f"{self.max_answer_chars} (gateway.max_answer_chars)"
                )
        return None


def check_items(
    items: Sequence[LabelItem], limits: ItemLimits
) -> tuple[list[LabelItem], dict[str, str]]:
    """The items, and the reason each one the pipeline would refuse fails (by item id).

    An item whose id is too long to store or send is kept under a stand-in id
    (``long:`` + a hash of the id), its reason naming the original's start.
    """
    kept: list[LabelItem] = []
    failed: dict[str, str] = {}
    for original in items:
        item, reason = original, limits.problem(original)
        if reason is not None and len(original.item_id) > limits.max_id_chars:
            digest = hashlib.sha256(original.item_id.encode()).hexdigest()[:24]
            reason = f"{reason}; the item was {original.item_id[:40]!r}..."
            item = dataclasses.replace(original, item_id=f"long:{digest}")
        kept.append(item)
        if reason is not None:
            failed[item.item_id] = reason
    return kept, failed


def detect_format(path: Path) -> InputFormat:
    """A folder is BEIR, ``*.jsonl``/``*.json`` is JSONL, anything else TREC topics."""
    if path.is_dir():
        return "beir"
    if path.suffix in (".jsonl", ".json"):
        return "jsonl"
    return "trec"


def read_items(spec: InputSpec) -> list[LabelItem]:
    """The items ``spec`` names, in input order, each id once.

    Raises:
        NotFoundError: a file is missing.
        InvalidArgumentError: a row is malformed or an id repeats (names the file and line).
    """
    if spec.format == "jsonl":
        items = read_jsonl(spec.path, spec.fields)
    elif spec.format == "beir":
        items = read_beir(spec.path, run=spec.run, split=spec.split, depth=spec.depth)
    elif spec.format == "trec":
        if spec.run is None or spec.corpus is None:
            raise InvalidArgumentError(
                "a TREC input needs --run (the candidates) and --corpus (their texts) "
                "beside the topics file",
                field="run" if spec.run is None else "corpus",
            )
        items = read_trec(
            spec.path, run=spec.run, corpus=spec.corpus, qrels=spec.qrels, depth=spec.depth
        )
    else:
        raise InvalidArgumentError(
            f"input format {spec.format!r} is not jsonl, beir or trec", field="format"
        )
    _check_unique(items, spec.path)
    return items


def _check_unique(items: Sequence[LabelItem], path: Path) -> None:
    seen: set[str] = set()
    for item in items:
        if item.item_id in seen:
            raise InvalidArgumentError(
                f"{path}: item id {item.item_id!r} occurs twice; every item needs its own id "
                "(the store is keyed by it)",
                field="item_id",
            )
        seen.add(item.item_id)


def _content_id(query: str, chunk: str) -> str:
    digest = hashlib.sha256(json.dumps([query, chunk]).encode()).hexdigest()[:16]
    return f"h:{digest}"


def read_jsonl(path: Path, fields: Mapping[str, str] | None = None) -> list[LabelItem]:
    """One item per line: ``query``, ``chunk``, optional ``answers``, ids and gold grade.

    ``fields`` maps item fields to other keys (``{"chunk": "passage"}``); see
    :data:`JSONL_FIELDS` for the keys read by default.
    """
    overrides = dict(fields or {})
    unknown = set(overrides) - set(JSONL_FIELDS)
    if unknown:
        raise InvalidArgumentError(
            f"unknown item field(s) {sorted(unknown)} in the field mapping; known: "
            f"{', '.join(JSONL_FIELDS)}",
            field="fields",
        )
    keys = {
        name: (overrides[name],) if name in overrides else keys
        for name, keys in JSONL_FIELDS.items()
    }
    items: list[LabelItem] = []
    for where, _, row in jsonl_rows(path, field="input"):

        def get(name: str, row: dict[str, Any] = row) -> Any:
            return next((row[key] for key in keys[name] if key in row), None)

        query, chunk = get("query"), get("chunk")
        for name, value in (("query", query), ("chunk", chunk)):
            if not isinstance(value, str) or not value.strip():
                raise InvalidArgumentError(
                    f"{where}: no non-empty {name} (read from {', '.join(keys[name])}; map "
                    f"another key with --field {name}=KEY)",
                    field=name,
                )
        answers = get("answers")
        if answers is None:
            answers = []
        elif isinstance(answers, str):
            answers = [answers]
        if not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
            raise InvalidArgumentError(f"{where}: answers must be a list of strings")
        query_id = str(get("query_id") or "")
        doc_id = str(get("doc_id") or "")
        explicit = get("item_id")
        if explicit not in (None, ""):
            item_id = str(explicit)
        elif query_id and doc_id:
            item_id = f"{query_id}:{doc_id}"
        else:
            item_id = _content_id(query, chunk)
        items.append(
            LabelItem(
                item_id=item_id,
                query=query,
                chunk=chunk,
                answers=tuple(a for a in answers if a.strip()),
                query_id=query_id,
                doc_id=doc_id,
                gold=parse_grade(get("gold"), where),
            )
        )
    return items
