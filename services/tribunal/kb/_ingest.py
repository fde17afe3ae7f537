"""Reading knowledge bases from JSONL files.

Three record formats, one JSON object per line:

``faq``
    ``{"question", "answer", ...}`` (the COVID FAQ format): every other scalar
    field becomes metadata; the answer, chunked, becomes the supporting
    chunks (titled with the question). The id is ``"id"`` when present, else
    ``faq-`` + a hash of question and answer, so re-ingesting the same file
    replaces rather than duplicates.
``corpus``
    ``{"id" or "_id", "text", "title"}`` (BEIR corpora): a document entry with
    no question or answer, whose chunks are the chunked text (a
    ``"sentences"`` list, when present, gives the sentence boundaries).
``entries``
    The native form: ``{"id", "question", "answer", "metadata", "chunks":
    [{"id", "text", "title"}]}``, written by :func:`entry_to_record`.

``auto`` picks the format from each record's keys.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from ..core import InvalidArgumentError, jsonl_rows
from ._chunking import chunk_sentences, chunk_text
from ._entry import Chunk, KbEntry

__all__ = [
    "RecordFormat",
    "deduplicate",
    "entry_from_record",
    "entry_to_record",
    "read_entries",
]

RecordFormat = Literal["auto", "faq", "corpus", "entries"]


def _detect(record: Mapping[str, Any]) -> RecordFormat:
    if "chunks" in record:
        return "entries"
    if "question" in record and "answer" in record:
        return "faq"
    if "text" in record:
        return "corpus"
    raise InvalidArgumentError(
        "cannot tell the record format: expected 'question' and 'answer' (faq), "
        f"'text' (corpus) or 'chunks' (entries); got keys {sorted(record)}",
        field="format",
    )


def _text(record: Mapping[str, Any], key: str, *, required: bool) -> str:
    value = record.get(key, "")
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidArgumentError(f"field {key!r} must be a string", field=key)
    if required and not value.strip():
        raise InvalidArgumentError(f"field {key!r} must be a non-empty string", field=key)
    return value


def _faq_entry(record: Mapping[str, Any], max_chars: int) -> KbEntry:
    question = _text(record, "question", required=True).strip()
    answer = _text(record, "answer", required=True).strip()
    entry_id = str(record.get("id") or "")
    if not entry_id:
        digest = hashlib.sha256(f"{question}\x00{answer}".encode()).hexdigest()
        entry_id = f"faq-{digest[:16]}"
    metadata = {
        key: str(value)
        for key, value in record.items()
        if key not in {"id", "question", "answer"} and isinstance(value, str | int | float | bool)
    }
    chunks = chunk_text(answer, title=question, max_chars=max_chars)
    return KbEntry(entry_id, question, answer, metadata, tuple(chunks))


def _corpus_entry(record: Mapping[str, Any], max_chars: int) -> KbEntry:
    entry_id = str(record.get("id") or record.get("_id") or "")
    if not entry_id:
        raise InvalidArgumentError("a corpus record needs an 'id' (or '_id')", field="id")
    title = _text(record, "title", required=False)
    sentences = record.get("sentences")
    if isinstance(sentences, list) and sentences and all(isinstance(s, str) for s in sentences):
        chunks = chunk_sentences(sentences, title=title, max_chars=max_chars)
    else:
        chunks = chunk_text(_text(record, "text", required=True), title=title, max_chars=max_chars)
    metadata = {"title": title} if title else {}
    return KbEntry(entry_id, metadata=metadata, chunks=tuple(chunks))


def _native_entry(record: Mapping[str, Any]) -> KbEntry:
    entry_id = str(record.get("id") or "")
    if not entry_id:
        raise InvalidArgumentError("an entry needs a non-empty 'id'", field="id")
    raw_chunks = record.get("chunks") or []
    if not isinstance(raw_chunks, list):
        raise InvalidArgumentError("'chunks' must be a list", field="chunks")
    chunks = tuple(
        Chunk(
            id=str(c.get("id") or f"chunk-{i}"),
            text=_text(c, "text", required=False),
            title=_text(c, "title", required=False),
        )
        for i, c in enumerate(raw_chunks)
    )
    metadata = record.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise InvalidArgumentError("'metadata' must be an object", field="metadata")
    return KbEntry(
        entry_id,
        _text(record, "question", required=False),
        _text(record, "answer", required=False),
        {str(k): str(v) for k, v in metadata.items()},
        chunks,
    )


def entry_from_record(
    record: Mapping[str, Any], *, record_format: RecordFormat = "auto", max_chars: int
) -> KbEntry:
    """One JSON object as a :class:`KbEntry`.

    Raises:
        InvalidArgumentError: the record lacks a required field or has a wrong type.
    """
    kind = _detect(record) if record_format == "auto" else record_format
    if kind == "faq":
        return _faq_entry(record, max_chars)
    if kind == "corpus":
        return _corpus_entry(record, max_chars)
    return _native_entry(record)


def entry_to_record(entry: KbEntry) -> dict[str, Any]:
    """The native JSON form of an entry (``entries`` format)."""
    return {
        "id": entry.id,
        "question": entry.question,
        "answer": entry.answer,
        "metadata": dict(entry.metadata),
        "chunks": [{"id": c.id, "text": c.text, "title": c.title} for c in entry.chunks],
    }


def read_entries(
    path: Path, *, record_format: RecordFormat = "auto", max_chars: int, limit: int | None = None
) -> Iterator[KbEntry]:
    """Entries of a JSONL file, in file order (blank lines skipped).

    Raises:
        InvalidArgumentError: the file is missing, or a line is not a valid
            record (the message names the file and line).
    """
    if not path.is_file():
        raise InvalidArgumentError(f"no such file: {path}", field="path")
    if limit is not None and limit <= 0:
        return
    for count, row in enumerate(jsonl_rows(path), start=1):
        try:
            yield entry_from_record(row.value, record_format=record_format, max_chars=max_chars)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{row.where}: {exc}", field="path") from exc
        if limit is not None and count >= limit:
            return


def deduplicate(entries: Iterable[KbEntry]) -> tuple[list[KbEntry], list[str]]:
    """Keep the last entry of each id (as repeated upserts would); also the repeated ids."""
    by_id: dict[str, KbEntry] = {}
    repeated: dict[str, None] = {}
    for entry in entries:
        if entry.id in by_id:
            repeated[entry.id] = None
        by_id[entry.id] = entry
    return list(by_id.values()), list(repeated)
