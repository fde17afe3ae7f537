"""Reading JSON Lines files: one JSON object per line, every error at ``file:line``.

Every JSONL input Tribunal takes (KB entries, labelled traffic, labelled signals,
label items, votes, review attention lists, matcher datasets) goes through
:func:`jsonl_rows`, so a bad line is reported the same way everywhere: the file, the
line number and what to fix. Blank lines are skipped; a UTF-8 byte-order mark at the
start of the file (as some editors write) is ignored; ``NaN`` and ``Infinity``, which
Python's :mod:`json` accepts but JSON does not, are refused. The file is read one line
at a time, so a large corpus is never held in memory whole.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ._errors import InvalidArgumentError, NotFoundError

__all__ = ["JsonlRow", "jsonl_rows", "parse_jsonl"]

_BOM = "\ufeff"


class JsonlRow(NamedTuple):
    """One line of a JSONL file."""

    where: str
    """``file:line``: prefix for any message about this row."""
    number: int
    """1-based line number."""
    value: dict[str, Any]
    """The line's JSON object."""


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (write a number or null)")


def _decode(raw: bytes, where: str, field: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            f"{where}: not UTF-8 text (byte {exc.start + 1} of the line is "
            f"0x{raw[exc.start]:02x}); save the file as UTF-8",
            field=field,
        ) from None


def _parse(text: str, where: str, field: str, bare_key: str | None) -> dict[str, Any]:
    try:
        # Without the line break, so that a column is the line's own.
        value = json.loads(text.rstrip("\r\n"), parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(
            f"{where}: not JSON ({exc.msg} at column {exc.colno})", field=field
        ) from None
    except ValueError as exc:
        raise InvalidArgumentError(f"{where}: {exc}", field=field) from None
    if bare_key is not None and isinstance(value, str):
        return {bare_key: value}
    if not isinstance(value, dict):
        raise InvalidArgumentError(
            f"{where}: each line must be a JSON object ({{...}}), not {_kind(value)}",
            field=field,
        )
    return value


def _kind(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return "a number"


def jsonl_rows(path: str | Path, *, field: str = "path") -> Iterator[JsonlRow]:
    """The JSON objects of a JSONL file, in file order, with where each one stands.

    Args:
        path: The file.
        field: Reported as the error's ``field`` (the option or setting that named the
            file).

    Raises:
        NotFoundError: the file does not exist.
        InvalidArgumentError: a line is not UTF-8, not JSON, or not a JSON object; the
            message starts with ``file:line``.
    """
    source = Path(path)
    if not source.is_file():
        raise NotFoundError(f"{source}: no such file", field=field)
    with source.open("rb") as handle:
        yield from parse_jsonl(handle, str(source), field=field)


def parse_jsonl(
    lines: Iterable[bytes | str], source: str, *, field: str = "path", bare_key: str | None = None
) -> Iterator[JsonlRow]:
    """The JSON objects of JSONL ``lines`` (a file's or standard input's), with
    ``source:line`` for each; see :func:`jsonl_rows`.

    Args:
        lines: The lines, as bytes (decoded here, strictly as UTF-8) or text.
        source: What the lines come from, for messages (a path, ``<stdin>``).
        field: Reported as the error's ``field``.
        bare_key: When given, a line holding a bare JSON string ``"..."`` stands for
            ``{bare_key: "..."}``.

    Raises:
        InvalidArgumentError: a line is not UTF-8, not JSON, or not a JSON object.
    """
    for number, raw in enumerate(lines, start=1):
        where = f"{source}:{number}"
        line = _decode(raw, where, field) if isinstance(raw, bytes) else raw
        if number == 1:
            line = line.removeprefix(_BOM)
        if not line.strip():
            continue
        yield JsonlRow(where, number, _parse(line, where, field, bare_key))
