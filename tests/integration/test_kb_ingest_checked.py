"""``tribunal kb ingest`` is all-or-nothing per file: every line is checked first.

A malformed file — a truncated line, a wrong type, an oversized answer, a repeated id,
a byte-order mark, invalid UTF-8, an empty file, a line that is not an object, a
question of stop-words only, an id over ``server.max_id_chars`` — gives one error naming
``file:line`` (exit 2), and the collection is left exactly as it was: the bad line
comes after good ones that would otherwise have been written.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest
from tribunal.cli import main

pytestmark = pytest.mark.models


def _good(index: int) -> dict[str, object]:
    return {
        "id": f"faq-{index}",
        "question": f"How long does the incubation of variant {index} last?",
        "answer": f"The incubation of variant {index} lasts up to 14 days.",
    }


def _file(tmp_path: Path, name: str, lines: list[bytes]) -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def _json(record: object) -> bytes:
    return json.dumps(record).encode("utf-8")


def _state(data: Path) -> tuple[int, str]:
    """Rows of the collection's store and a digest of every entry."""
    with sqlite3.connect(data / "retrieval" / "covid" / "entries.sqlite3") as db:
        rows = db.execute("SELECT id, record FROM entries ORDER BY id").fetchall()
        signatures = db.execute("SELECT count(*) FROM signatures").fetchone()[0]
    digest = hashlib.sha256(json.dumps(rows).encode()).hexdigest()
    return len(rows) + signatures, digest


GOOD = [_json(_good(i)) for i in range(12)]
CASES = {
    "truncated-line": ([*GOOD, _json(_good(99))[:-9]], 13, "not valid JSON"),
    "wrong-type": ([*GOOD, _json({**_good(99), "answer": 42})], 13, "'answer' must be a string"),
    "oversized-answer": (
        [*GOOD, _json({**_good(99), "answer": "word " * 2_000_000})],
        13,
        "entry.answer has 9999999 characters",
    ),
    "duplicate-id": ([*GOOD, _json({**_good(3), "answer": "Another answer."})], 13, "line 4"),
    "bom": ([b"\xef\xbb\xbf" + GOOD[0], *GOOD[1:]], 1, "byte-order mark"),
    "invalid-utf8": ([*GOOD, _json(_good(99)).replace(b"variant", b"vari\xffant")], 13, "UTF-8"),
    "not-an-object": ([*GOOD, b'["a", "list"]'], 13, "not list"),
    "stop-words-only-question": (
        [*GOOD, _json({**_good(99), "question": "the of and to"})],
        13,
        "no searchable words",
    ),
    "id-over-the-limit": ([*GOOD, _json({**_good(99), "id": "x" * 1000})], 13, "max_id_chars"),
    "empty": ([b""], 0, "holds no entries"),
}


def test_a_malformed_file_names_its_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    first = _file(tmp_path, "first.jsonl", [_json(_good(i)) for i in range(100, 103)])
    assert main(["kb", "ingest", str(first), "--collection", "covid", "--skip-match-vectors"]) == 0
    assert "created the KB signing key" in capsys.readouterr().err
    key = data / "keys" / "kb-signing.key"
    assert key.stat().st_mode & 0o777 == 0o600
    before = _state(data)
    assert before[0] == 3 + 3  # three entries and their signed records
    for name, (lines, line, message) in CASES.items():
        path = _file(tmp_path, f"{name}.jsonl", lines)
        code = main(["kb", "ingest", str(path), "--collection", "covid", "--skip-match-vectors"])
        err = capsys.readouterr().err
        assert code == 2, (name, err)
        where = f"{path}:{line}" if line else str(path)
        assert where in err, (name, err)
        assert message in err, (name, err)
        assert "nothing was written" in err, (name, err)
        assert _state(data) == before, name
    # The same lines without the bad one are written, and signed.
    good = _file(tmp_path, "good.jsonl", GOOD)
    assert main(["kb", "ingest", str(good), "--collection", "covid", "--skip-match-vectors"]) == 0
    assert _state(data)[0] == 15 + 15
