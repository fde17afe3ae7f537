"""docs/walkthrough.md, run as written: every command of its ``bash`` blocks, in order.

The commands are read from the page itself (a ``.venv/bin/`` line, ``\\`` continuing it),
so the page cannot drift from what works. They run from the repository root on the
tiny profile's real models, with a fresh data folder and lab cache; the checks read
what each step wrote.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGE = REPO / "docs" / "walkthrough.md"
OUT = REPO / ".build" / "walkthrough"

pytestmark = [pytest.mark.models, pytest.mark.slow, pytest.mark.extended]


def walkthrough_commands(page: Path = PAGE) -> list[list[str]]:
    """Each command of the page's ``bash`` blocks, as argv."""
    commands: list[list[str]] = []
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(encoding="utf-8"), flags=re.S):
        pending = ""
        for raw in block.splitlines():
            line = raw.split("  #", 1)[0].rstrip() if not pending else raw.rstrip()
            if not pending and not line.startswith(".venv/bin/"):
                continue
            pending += line.removesuffix("\\").strip() + " "
            if not line.endswith("\\"):
                commands.append(shlex.split(pending))
                pending = ""
    return commands


def test_the_page_lists_each_step_once() -> None:
    commands = walkthrough_commands()
    programs = [" ".join(argv[:3]) for argv in commands]
    assert programs[0].startswith(".venv/bin/tribunal kb ingest")
    for step in (
        ".venv/bin/tribunal ask",
        ".venv/bin/tribunal-lab eval matching-features",
        ".venv/bin/tribunal-lab eval entailment",
        ".venv/bin/tribunal calibrate",
        ".venv/bin/tribunal label run",
        ".venv/bin/tribunal label evaluate",
    ):
        assert any(p.startswith(step) for p in programs), step


# 9.7-19 min on 2 cores shared with other jobs (docs/results/walkthrough.md).
@pytest.mark.timeout(3600)
def test_the_walkthrough_runs_as_written(tmp_path: Path) -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    env = {
        **os.environ,
        "TRIBUNAL_DATA_DIR": str(tmp_path / "data"),
        "TRIBUNAL_LAB_CACHE": str(tmp_path / "lab-cache"),
    }
    timings = []
    for argv in walkthrough_commands():
        started = time.perf_counter()
        done = subprocess.run(
            argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=1200, check=False
        )
        timings.append((" ".join(argv[:4]), round(time.perf_counter() - started, 1)))
        assert done.returncode == 0, (
            f"{' '.join(argv)}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    print("step timings (s):", timings)

    questions = (REPO / "docs/walkthrough/questions.jsonl").read_text().splitlines()
    answers = [json.loads(line) for line in (OUT / "answers.jsonl").read_text().splitlines()]
    assert len(answers) == len(questions) == 100
    assert [a["id"] for a in answers] == [json.loads(q)["id"] for q in questions]
    for row in answers:
        assert row["decision"] in ("ACCEPT", "FALLBACK")
        assert row["audit_id"]
        assert row["latency_ms"] > 0
        if row["decision"] == "ACCEPT":
            assert row["kb_entry_id"].startswith("lib-")
    # A question no entry answers is never given an entry.
    assert not [a for a in answers if not a["expected"] and a["decision"] == "ACCEPT"]

    matcher = json.loads((OUT / "matcher.json").read_text())
    assert matcher["kind"] == "traffic"
    assert matcher["queries"]["n"] == 100
    assert matcher["thresholds"]["artifact"]["source"].startswith("the artifact's")

    entailment = json.loads((OUT / "entailment.json").read_text())
    (result,) = entailment["sets"].values()
    assert result["test_pairs"] == 10
    stage1 = result["rows"]["stage 1 alone"]
    assert "uncertain_high" in stage1["threshold"]["source"]

    calibration = list((OUT / "calibrate").iterdir())
    assert calibration, "calibrate wrote no report"
    assert (tmp_path / "data" / "confidence" / "calibrator.json").is_file()

    labels = [
        json.loads(line) for line in (OUT / "labels" / "labels.jsonl").read_text().splitlines()
    ]
    assert len(labels) == 9
    assert {row["source"] for row in labels} == {"JUDGES"}
    assert (OUT / "labels" / "qrels.holes.txt").read_text().count("\n") == 4  # 9 pairs, 5 judged
