"""``tribunal ask --file``: many queries against a running gateway, rows and a summary.

The gateway is the real one (``build_host``, real gRPC, bearer-token auth, the audit
store) over the scripted stages of tests/integration/_scripted_stages.py, so the
decisions are known; the in-process path on the real models is run by the walkthrough
test (tests/integration/test_walkthrough.py).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.commands._ask_rows import read_queries, summary_markdown
from tribunal.core import InvalidArgumentError, load_settings
from tribunal.gateway.servicer import build_host

from tests.integration import _scripted_stages
from tests.integration._scripted_stages import Script

TOKEN = "ask-file-test-token-0123456789"


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[str]:
    script = Script()
    stages = _scripted_stages.start(script)
    address = f"127.0.0.1:{stages.port}"
    settings = load_settings(
        "tiny",
        server={"port": 0, "metrics_port": None, "grace_seconds": 0.5, "auth_token": TOKEN},
        database_url=f"sqlite:///{tmp_path / 'audit.db'}",
        confidence=script.confidence_settings,
        gateway={
            "kb_trusted_keys": script.trusted_keys,
            "discovery": "grpc",
            "addresses": dict.fromkeys(
                ("retrieval", "ensemble", "entailment", "confidence", "debate"), address
            ),
            "stage_token": None,
        },
    )
    host = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(20), host.load_error
    try:
        yield f"127.0.0.1:{port}"
    finally:
        host.stop(0)
        stages.stop(0)


QUERIES = [
    {"id": "a", "query": "How long is the incubation period?", "answers": ["faq-1"]},
    {"id": "b", "query": "Can pets spread it?", "answers": ["faq-2"]},
    {"id": "c", "query": "x" * 5000},  # over gateway.max_query_chars: refused, not a decision
]


def test_a_file_through_a_running_gateway_with_a_token(
    gateway: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps(q) + "\n" for q in QUERIES))
    out = tmp_path / "answers.jsonl"
    argv = ["ask", "--file", str(queries), "--address", gateway, "--collection", "faq"]
    code = main([*argv, "--token", TOKEN, "--out", str(out), "--no-progress"])
    assert code == 1  # one query was refused
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["a", "b", "c"]
    first = rows[0]
    # The scripted stages answer faq-1 first with P(match) 0.9 (accepted at 0.5).
    assert (first["decision"], first["kb_entry_id"], first["correct"]) == ("ACCEPT", "faq-1", True)
    assert first["confidence"] >= first["threshold"]
    assert first["evidence"]
    assert first["evidence"][0]["chunk_id"]
    assert set(first["stage_ms"]) >= {"retrieval", "ensemble", "confidence"}
    assert first["audit_id"]
    assert rows[1]["correct"] is False  # faq-1 accepted for a question faq-2 answers
    assert rows[2]["decision"] == "ERROR"
    assert rows[2]["error"].startswith("INVALID_ARGUMENT")
    summary = capsys.readouterr().out
    assert "| ACCEPT | 2 | 66.7% |" in summary
    assert "| accepted with a wrong entry (answerable query) | 1 |" in summary
    assert "| accepted though no entry answers it (out of scope) | 0 |" in summary
    assert "query c: INVALID_ARGUMENT" in summary

    # Standard input, rows to standard output; without the token every query is refused.
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("sys.stdin", io.StringIO(json.dumps(QUERIES[0]) + "\n"))
        assert main([*argv[:1], "--file", "-", *argv[3:], "--token-file", str(token_file)]) == 0
    captured = capsys.readouterr()
    (row,) = [json.loads(line) for line in captured.out.splitlines()]
    assert row["decision"] == "ACCEPT"
    assert "1 query in" in captured.err  # the summary goes to stderr beside piped rows
    assert main([*argv, "--no-progress"]) == 1
    refused = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert {r["error"].split(":")[0] for r in refused} == {"UNAUTHENTICATED"}


def test_bad_input_is_refused_before_anything_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"query": "fine"}\n{"query": "broken"\n')
    assert main(["ask", "--file", str(bad), "--address", "127.0.0.1:1"]) == 2
    assert "bad.jsonl:2: not JSON" in capsys.readouterr().err
    with pytest.raises(InvalidArgumentError, match="answers must be a list"):
        read_queries(['{"query": "q", "answers": "faq-1"}'], "x")
    assert read_queries(['"just a question"'], "x")[0].query == "just a question"
    assert main(["ask", "one question", "--file", str(bad)]) == 2


def test_the_summary_counts_right_and_wrong_answers() -> None:
    rows = [
        {"decision": "ACCEPT", "reason": None, "latency_ms": 10.0, "expected": ["e1"],
         "correct": True},
        {"decision": "ACCEPT", "reason": None, "latency_ms": 30.0, "expected": [],
         "correct": False},
        {"decision": "FALLBACK", "reason": "LOW_CONFIDENCE", "latency_ms": 20.0,
         "expected": [], "correct": True},
        {"decision": "FALLBACK", "reason": "LOW_CONFIDENCE", "latency_ms": 20.0,
         "expected": ["e2"], "correct": False},
    ]  # fmt: skip
    text = summary_markdown(rows, 2.0)
    assert text.startswith("4 queries in 2.0 s (2.00 queries/s)")
    assert "| LOW_CONFIDENCE | 2 |" in text
    # The accepted out-of-scope query is counted under its own name, not as a wrong entry.
    assert "| accepted with a wrong entry (answerable query) | 0 |" in text
    assert "| accepted though no entry answers it (out of scope) | 1 |" in text
    assert "| hallucination rate (both kinds of wrong / accepted) | 0.500 |" in text
    assert "| answerable ones answered right | 0.500 |" in text
    assert "| unanswerable ones refused | 0.500 |" in text


def test_one_question_against_a_running_gateway(
    gateway: str, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["ask", "How long is the incubation period?", "--address", gateway]
    assert main([*argv, "--collection", "faq", "--token", TOKEN]) == 0
    out = capsys.readouterr().out
    assert "decision:   ACCEPT" in out
    assert "KB entry:   faq-1" in out
    assert main(argv) == 2  # no token: refused, said plainly
    assert "tribunal: error: UNAUTHENTICATED" in capsys.readouterr().err
