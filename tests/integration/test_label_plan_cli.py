"""`tribunal label plan` then `tribunal label run --plan` on real TREC DL 2019 pairs with
the tiny profile's shipped relevance judge (the real MPNet model), as subprocesses.

The plan is fitted on 80 judged pairs of 10 queries (item-level tests and Platt
calibration: ten queries are too few for the default query-level test to certify
anything at ε = 0.3 with this judge); the job labels 8 pairs of two
other queries through ``Gateway.Label``'s pipeline: every item outside the plan's band
is labelled by the judge, every item inside goes to the human queue (no debate), and
the report and outputs say so. A plan bound to another judge version is refused with
FAILED_PRECONDITION naming the command that makes a new one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tribunal.jobs import JudgeBinding, LabelPlan

from tests.conftest import REPO, SHARED

PLAN_QUERIES = (
    "19335", "47923", "87181", "87452", "104861", "130510", "131843", "146187", "148538", "156493",
)  # fmt: skip
RUN_QUERIES = ("182539", "183378")


def _sample(path: Path, queries: tuple[str, ...], per_query: int) -> list[dict[str, object]]:
    """``per_query`` pairs spread over each query's judged pairs, in file order."""
    by_query: dict[str, list[dict[str, object]]] = {}
    source = SHARED / "data" / "trec-dl-2019" / "dl19_judged_pairs.jsonl"
    for line in source.read_text().splitlines():
        row = json.loads(line)
        by_query.setdefault(row["qid"], []).append(row)
    rows = []
    for qid in queries:
        group = by_query[qid]
        rows += group[:: max(1, len(group) // per_query)][:per_query]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return rows


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUNAL_")}
    if "TRIBUNAL_MODEL_DIR" in os.environ:
        env["TRIBUNAL_MODEL_DIR"] = os.environ["TRIBUNAL_MODEL_DIR"]
    env["TRIBUNAL_DATA_DIR"] = str(tmp_path / "data")
    return env


def _cli(env: dict[str, str], *args: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tribunal.cli", "label", *args],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


@pytest.mark.models
@pytest.mark.slow
# The plan's maths run in tests/unit/test_label_plan.py; this drives the CLI end to end.
@pytest.mark.extended
@pytest.mark.timeout(1200)  # four CLI processes, two of them loading MPNet
def test_plan_then_label_with_it_on_real_trec_pairs(tmp_path: Path) -> None:
    env = _env(tmp_path)
    _sample(tmp_path / "sample.jsonl", PLAN_QUERIES, 8)
    run_rows = _sample(tmp_path / "items.jsonl", RUN_QUERIES, 4)
    plan_path = tmp_path / "plan.json"
    planned = _cli(
        env, "plan", "--input", str(tmp_path / "sample.jsonl"), "--epsilon", "0.3",
        "--delta", "0.2", "--calibration-share", "0.5", "--clusters", "none",
        "--calibrator", "platt", "--out", str(plan_path), "--no-progress",
    )  # fmt: skip
    assert planned.returncode == 0, planned.stdout + planned.stderr
    plan = LabelPlan.load(plan_path)
    assert plan.certification.certified
    assert plan.band is not None
    assert plan.data.items == 80
    assert plan.data.queries == 10
    assert plan.certification.upper_bound is not None
    assert plan.certification.upper_bound <= 0.3
    assert (tmp_path / "plan.png").stat().st_size > 10_000
    assert plan.version in planned.stdout
    assert "humans between" in planned.stdout

    database = f"sqlite:///{tmp_path / 'labels.db'}"
    out, report_path = tmp_path / "out", tmp_path / "report.json"
    labelled = _cli(
        env, "run", "--job", "dl19-plan", "--input", str(tmp_path / "items.jsonl"),
        "--plan", str(plan_path), "--database-url", database, "--no-progress",
        "--out", str(out), "--report", str(report_path),
    )  # fmt: skip
    assert labelled.returncode == 0, labelled.stdout + labelled.stderr
    rows = [json.loads(line) for line in (out / "labels.jsonl").read_text().splitlines()]
    assert len(rows) == len(run_rows) == 8
    band = plan.band
    for row in rows:
        p = row["p_relevant"]
        if p >= band.relevant_at:
            assert (row["source"], row["label"]) == ("JUDGES", 1), row
        elif p <= band.irrelevant_at:
            assert (row["source"], row["label"]) == ("JUDGES", 0), row
        else:
            assert (row["source"], row["label"]) == ("HUMAN_QUEUE", None), row
            assert row["debate_outcome"] is None  # the band goes to humans, not the debate
    sources = [row["source"] for row in rows]
    assert "JUDGES" in sources
    assert "HUMAN_QUEUE" in sources
    queued = [json.loads(line) for line in (out / "escalations.jsonl").read_text().splitlines()]
    assert sorted(q["item_id"] for q in queued) == sorted(
        row["item_id"] for row in rows if row["source"] == "HUMAN_QUEUE"
    )
    assert {q["reason"] for q in queued} == {"band"}
    qrels = (out / "qrels.txt").read_text().splitlines()
    assert len(qrels) == sources.count("JUDGES")

    report = json.loads(report_path.read_text())["plan"]
    assert report["plan"] == plan.version
    assert report["by_source"] == {
        "judge": sources.count("JUDGES"),
        "human_queue": sources.count("HUMAN_QUEUE"),
    }
    assert report["human_share"] == pytest.approx(sources.count("HUMAN_QUEUE") / 8)
    assert report["epsilon"] == 0.3
    assert report["certified_bound"] == plan.certification.upper_bound
    assert report["gold_checked"] == report["auto_labelled"] == sources.count("JUDGES")
    assert "certified error <= 0.3 with probability >= 0.8" in labelled.stdout

    # A plan made for another judge is refused before any item is labelled.
    other = plan.model_copy(
        update={"judge": JudgeBinding(artifact_version="rel-another", profile="tiny")}
    ).sealed()
    other.save(tmp_path / "other.json")
    refused = _cli(
        env, "run", "--job", "dl19-other", "--input", str(tmp_path / "items.jsonl"),
        "--plan", str(tmp_path / "other.json"), "--database-url", database,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "rel-another" in refused.stderr
    assert "tribunal label plan --input" in refused.stderr
    # ... and so is a plan with a mode other than its own.
    wrong_mode = _cli(
        env, "run", "--job", "dl19-mode", "--input", str(tmp_path / "items.jsonl"),
        "--plan", str(plan_path), "--mode", "judge", "--database-url", database,
    )  # fmt: skip
    assert wrong_mode.returncode == 2
    assert "leave --mode out" in wrong_mode.stderr
