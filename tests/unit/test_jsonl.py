"""The one JSONL reader: every bad line reported at ``file:line``, by every reader built on it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tribunal.confidence import read_labelled_signals, read_traffic
from tribunal.core import InvalidArgumentError, NotFoundError, jsonl_rows, parse_jsonl
from tribunal.jobs import load_attention, read_jsonl
from tribunal.kb import read_entries


def _write(tmp_path: Path, data: bytes, name: str = "rows.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_rows_come_with_file_line_and_skip_blank_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, b'{"a": 1}\n\n   \r\n{"b": [2, 3]}\r\n{"c": null}')
    rows = list(jsonl_rows(path))
    assert [(r.where, r.number, r.value) for r in rows] == [
        (f"{path}:1", 1, {"a": 1}),
        (f"{path}:4", 4, {"b": [2, 3]}),
        (f"{path}:5", 5, {"c": None}),
    ]


def test_a_byte_order_mark_opening_the_file_is_ignored(tmp_path: Path) -> None:
    path = _write(tmp_path, b'\xef\xbb\xbf{"query": "caf\xc3\xa9"}\n')
    assert [r.value for r in jsonl_rows(path)] == [{"query": "café"}]


def test_a_byte_order_mark_inside_the_file_is_not_json(tmp_path: Path) -> None:
    path = _write(tmp_path, b'{"a": 1}\n\xef\xbb\xbf{"b": 2}\n')
    with pytest.raises(InvalidArgumentError, match=r":2: not JSON \(Unexpected UTF-8 BOM"):
        list(jsonl_rows(path))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"a": 1', r":2: not JSON \(Expecting ',' delimiter at column 8\)"),
        (b"{'a': 1}", r":2: not JSON \(Expecting property name enclosed in double quotes"),
        (b"[1, 2]", r":2: each line must be a JSON object \(\{\.\.\.\}\), not an array"),
        (b'"text"', r":2: each line must be a JSON object .*, not a string"),
        (b"42", r":2: each line must be a JSON object .*, not a number"),
        (b"null", r":2: each line must be a JSON object .*, not null"),
        (b"true", r":2: each line must be a JSON object .*, not a boolean"),
        (b'{"p": NaN}', r":2: NaN is not JSON \(write a number or null\)"),
        (b'{"p": -Infinity}', r":2: -Infinity is not JSON"),
        (b'{"q": "caf\xe9"}', r":2: not UTF-8 text \(byte 11 of the line is 0xe9\); save the file"),
    ],
)
def test_a_bad_line_is_named_by_file_and_line(tmp_path: Path, line: bytes, message: str) -> None:
    path = _write(tmp_path, b'{"ok": 1}\n' + line + b'\n{"ok": 3}\n')
    rows = jsonl_rows(path, field="traffic")
    assert next(rows).value == {"ok": 1}
    with pytest.raises(InvalidArgumentError, match=f"^{path}{message}") as caught:
        next(rows)
    assert caught.value.field == "traffic"


def test_a_missing_file_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"absent\.jsonl: no such file"):
        list(jsonl_rows(tmp_path / "absent.jsonl", field="data"))


def test_lines_from_elsewhere_take_text_or_bytes_and_bare_strings_when_asked() -> None:
    lines: list[bytes | str] = ['"just a question"', b'{"query": "q"}', ""]
    rows = list(parse_jsonl(lines, "<stdin>", field="file", bare_key="query"))
    assert [(r.where, r.value) for r in rows] == [
        ("<stdin>:1", {"query": "just a question"}),
        ("<stdin>:2", {"query": "q"}),
    ]
    with pytest.raises(InvalidArgumentError, match=r"^<stdin>:1: each line must be a JSON"):
        list(parse_jsonl(['"no bare strings here"'], "<stdin>"))


_BAD_SECOND_LINE = b'\n{"query": \n'


def _entries(path: Path) -> Any:
    return list(read_entries(path, max_chars=200))


def _items(path: Path) -> Any:
    return read_jsonl(path, {})


_EVERY_READER = pytest.mark.parametrize(
    "reader",
    [_entries, read_traffic, read_labelled_signals, load_attention, _items],
    ids=["kb entries", "traffic", "labelled signals", "attention", "label items"],
)


@_EVERY_READER
def test_every_reader_reports_the_file_and_line(
    tmp_path: Path, reader: Callable[[Path], Any]
) -> None:
    path = _write(tmp_path, _BAD_SECOND_LINE)
    with pytest.raises(InvalidArgumentError, match=f"^{path}:2: not JSON"):
        reader(path)


@_EVERY_READER
def test_every_reader_refuses_bytes_that_are_not_utf8(
    tmp_path: Path, reader: Callable[[Path], Any]
) -> None:
    path = _write(tmp_path, b'{"query": "\xff"}\n')
    with pytest.raises(InvalidArgumentError, match=f"^{path}:1: not UTF-8 text"):
        reader(path)
