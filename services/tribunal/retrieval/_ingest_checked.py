"""``tribunal kb ingest``'s reader: every line of a file checked before anything is written.

The checks are retrieval's request limits (:mod:`._validation`) applied line by line, so
a bad file is refused as a whole with ``file:line`` and the KB is left as it was.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import InvalidArgumentError
from ..kb import KbEntry, entry_from_record
from ._validation import check_entry

if TYPE_CHECKING:
    from ..core import RetrievalSettings
    from ..kb._ingest import RecordFormat

__all__ = ["read_entries_checked"]


_BOM = b"\xef\xbb\xbf"


def _line_error(where: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"{where}: {message}; nothing was written", field="path")


def _check_ids(entry: KbEntry, where: str, max_id_chars: int) -> None:
    """The ids the gRPC path holds to ``server.max_id_chars``: entry and chunk ids,
    metadata keys."""
    named = [("id", entry.id)]
    named += [(f"chunks[{j}].id", chunk.id) for j, chunk in enumerate(entry.chunks)]
    named += [(f"metadata key {key[:40]!r}", key) for key in entry.metadata]
    for what, value in named:
        if len(value) > max_id_chars:
            raise _line_error(
                where,
                f"{what} has {len(value)} characters; the limit is {max_id_chars} "
                "(server.max_id_chars): shorten it",
            )


def _record(raw: bytes, where: str) -> dict[str, Any]:
    """One line as a JSON object; a clear error for anything else."""
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _line_error(
            where, f"not valid UTF-8 (byte {exc.start + 1} of the line): save the file as UTF-8"
        ) from exc
    try:
        record = json.loads(line)
    except json.JSONDecodeError as exc:
        raise _line_error(
            where,
            f"not valid JSON ({exc.msg}, column {exc.colno}): each line must hold one "
            "complete JSON object (is the line cut short?)",
        ) from exc
    if not isinstance(record, dict):
        raise _line_error(where, f"a line must hold a JSON object, not {type(record).__name__}")
    return record


def read_entries_checked(
    path: Path,
    *,
    record_format: RecordFormat = "auto",
    settings: RetrievalSettings,
    max_id_chars: int,
    limit: int | None = None,
) -> tuple[list[KbEntry], list[str]]:
    """Every entry of a JSONL file, each line checked before the caller writes anything:
    UTF-8 without a byte-order mark, one JSON object per line, the record's fields, the
    request limits (sizes, searchable texts, ``server.max_id_chars``), and no explicit
    ``id`` given twice. Returns the entries (a derived id repeated: the last record kept)
    and the derived ids that repeated.

    Raises:
        InvalidArgumentError: the first problem, naming ``file:line``.
    """
    # One check per rule, written here rather than with a JSON-schema library: the
    # messages must name the line and the setting to change.
    if not path.is_file():
        raise InvalidArgumentError(f"no such file: {path}", field="path")
    data = path.read_bytes()
    if data.startswith(_BOM):
        raise _line_error(
            f"{path}:1",
            "the file starts with a UTF-8 byte-order mark: save it as UTF-8 without one",
        )
    entries: dict[str, KbEntry] = {}
    explicit: dict[str, int] = {}
    derived: dict[str, None] = {}
    count = 0
    for number, raw in enumerate(data.split(b"\n"), start=1):
        where = f"{path}:{number}"
        if not raw.strip():
            continue
        if limit is not None and count >= limit:
            break
        record = _record(raw, where)
        try:
            entry = entry_from_record(
                record, record_format=record_format, max_chars=settings.chunk_size_chars
            )
            check_entry(entry, settings, "entry")
        except InvalidArgumentError as exc:
            raise _line_error(where, exc.message) from exc
        _check_ids(entry, where, max_id_chars)
        if record.get("id") or record.get("_id"):
            if entry.id in explicit:
                raise _line_error(
                    where, f"id {entry.id!r} was already given on line {explicit[entry.id]}"
                )
            explicit[entry.id] = number
        elif entry.id in entries:
            derived[entry.id] = None
        entries[entry.id] = entry
        count += 1
    if not entries:
        raise InvalidArgumentError(
            f"{path}: the file holds no entries (it is empty or blank); nothing was written",
            field="path",
        )
    return list(entries.values()), list(derived)
