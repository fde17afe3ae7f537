"""``tribunal kb ingest|stats|search|delete`` on a real FAQ file and the real embedder."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.cli import main

from tests.conftest import SHARED

pytestmark = pytest.mark.models


def test_ingest_a_faq_file_then_search_stats_and_delete(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = SHARED / "data" / "covid-qa" / "faq_kb_en.jsonl"
    lines = source.read_text(encoding="utf-8").splitlines()[:12]
    faq = tmp_path / "faq.jsonl"
    faq.write_text("\n".join([*lines, lines[0]]) + "\n", encoding="utf-8")  # one repeat

    assert main(["kb", "ingest", str(faq), "--collection", "covid"]) == 0
    out = capsys.readouterr().out
    assert "1 id(s) appear more than once" in out
    assert "upserted 12 entries" in out
    # The feature matcher's vectors of each entry's question, answer and both, stored now.
    assert "match vectors: 36 new texts embedded" in out
    assert main(["kb", "ingest", str(faq), "--collection", "covid"]) == 0
    assert "match vectors: 0 new texts embedded" in capsys.readouterr().out

    question = json.loads(lines[0])["question"]
    assert main(["kb", "search", "covid", question, "--top-k", "3", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(hits) == 3
    assert hits[0]["question"] == question.strip()
    assert (hits[0]["rank"], hits[0]["matched"]) == (1, "question")

    assert main(["kb", "delete", "covid", hits[0]["id"], "missing-id"]) == 0
    assert "deleted 1; not found: missing-id" in capsys.readouterr().out
    assert main(["kb", "stats"]) == 0
    assert "covid: 11 entries" in capsys.readouterr().out
    assert main(["kb", "search", "nope", "anything"]) == 2  # NOT_FOUND, said plainly
    assert "collection 'nope' does not exist" in capsys.readouterr().err
