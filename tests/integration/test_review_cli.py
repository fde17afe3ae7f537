"""``tribunal review serve|stats|export`` as a user runs them."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.core.storage import Database
from tribunal.jobs._review import ReviewQueue, load_attention
from tribunal.jobs._review_annotators import AnnotatorRegistry
from tribunal.jobs._review_web import CSRF_HEADER, SESSION_COOKIE

from tests.integration._review_items import seed_escalations, write_attention


def test_serve_listens_on_loopback_and_stops_on_ctrl_c(database_url: str, tmp_path: Path) -> None:
    db = Database(database_url)
    e1, _ = seed_escalations(db, 2)
    key = AnnotatorRegistry(db).add("rita")
    checks = write_attention(tmp_path / "checks.jsonl")
    command = [
        sys.executable, "-m", "tribunal.cli", "review", "serve", "--database-url", database_url,
        "--port", "0", "--attention", str(checks), "--votes-per-item", "2",
    ]  # fmt: skip
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stderr is not None
        lines = [process.stderr.readline() for _ in range(2)]
        assert lines[0].startswith("warning: 1 of 2 attention checks have no debate history")
        match = re.match(
            r"review page: (http://127\.0\.0\.1:\d+/)\s+\(2 attention checks, 2 votes", lines[1]
        )
        assert match, lines
        url = match.group(1)
        deadline = time.monotonic() + 30
        while True:
            try:
                request = urllib.request.Request(
                    url + "api/next",
                    headers={CSRF_HEADER: "1", "Cookie": f"{SESSION_COOKIE}={key}"},
                )
                with urllib.request.urlopen(request, timeout=5) as response:
                    body = json.loads(response.read())
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not answer in 30 s"
                time.sleep(0.2)
        # seed 0: "rita" draws 0.740 at position 0, over the 0.2 rate: a real item.
        assert (body["item"]["item"], body["labelled"]) == (e1, 0)
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    db.close()


def test_stats_and_export(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = Database(database_url)
    e1, e2 = seed_escalations(db, 2)
    attention = load_attention(write_attention(tmp_path / "checks.jsonl"))
    queue = ReviewQueue(db, attention=attention, votes_per_item=2)
    token = next(iter(queue._attention_by_token))
    for annotator, label in (("ann", "relevant"), ("bob", "irrelevant")):
        queue.vote(annotator, e1, label)
    queue.vote("ann", e2, "relevant")
    queue.vote("bob", token, "relevant")  # a1, expected relevant: correct
    url = ["--database-url", database_url, "--votes-per-item", "2"]

    assert main(["review", "stats", *url]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["items"] == {"waiting": 0, "in_progress": 1, "done": 1}
    assert [(a["annotator"], a["votes"], a["attention_accuracy"]) for a in stats["annotators"]] == [
        ("ann", 2, None),
        ("bob", 2, 1.0),
    ]

    out = tmp_path / "votes.jsonl"
    assert main(["review", "export", *url, "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["task"], r["worker"], r["label"]) for r in rows] == [
        (e1, "ann", "relevant"),
        (e1, "bob", "irrelevant"),
        (e2, "ann", "relevant"),
    ]
    assert "3 votes -> " in capsys.readouterr().err
    assert main(["review", "export", *url, "--out", "-", "--include-attention"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 4
    assert main(["review", "export", *url, "--out", "-", "--min-attention-accuracy", "2"]) == 2
    assert "--min-attention-accuracy must be in [0, 1]" in capsys.readouterr().err
    db.close()
