"""`tribunal label evaluate` end to end on a tiny TREC fixture cut from TREC DL 2019, with
the tiny profile's shipped relevance judge (the real MPNet model), as subprocesses.

Two runs (BM25 and SPLADE++, top 5 of two queries), a few real qrels lines as existing
human labels: the first call labels the holes with the judge through a label job and
queues a human sample of 6 for review (no intervals yet: judge-only figures); reviewers
vote through the review queue, `label aggregate` merges their labels into the job; the
second call reads them and reports intervals, differences, Kendall τ, JSON and a PNG.
Bad input is refused with a message naming what to fix.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.jobs import JobStore, ReviewQueue, export_votes

from tests.conftest import REPO, SHARED

DL19 = SHARED / "data" / "trec-dl-2019"
QUERIES = ("19335", "47923")
DEPTH = 5


def _fixture(folder: Path) -> dict[tuple[str, str], int]:
    """Runs, topics, corpus and a few qrels; returns the full qrels of the pool."""
    folder.mkdir()
    pool: set[tuple[str, str]] = set()
    for name in ("BM25", "SPLADE_P_P_ENSEMBLE_DISTIL"):
        lines = [
            line
            for line in (DL19 / "runs" / f"{name}.trec").read_text().splitlines()
            if line.split()[0] in QUERIES and int(line.split()[3]) <= DEPTH
        ]
        (folder / f"{name}.trec").write_text("\n".join(lines) + "\n")
        pool |= {(line.split()[0], line.split()[2]) for line in lines}
    topics = {}
    for line in (DL19 / "dl19_judged_pairs.jsonl").read_text().splitlines():
        row = json.loads(line)
        topics[row["qid"]] = row["query"]
    (folder / "topics.tsv").write_text("".join(f"{q}\t{topics[q]}\n" for q in QUERIES))
    wanted = {docid for _, docid in pool}
    corpus = [
        json.loads(line)
        for line in (DL19 / "passages.jsonl").read_text().splitlines()
        if json.loads(line)["pid"] in wanted
    ]
    (folder / "corpus.tsv").write_text("".join(f"{r['pid']}\t{r['passage']}\n" for r in corpus))
    qrels = {}
    for line in (DL19 / "qrels.dl19-passage.txt").read_text().splitlines():
        qid, _, docid, grade = line.split()
        if (qid, docid) in pool:
            qrels[(qid, docid)] = int(grade)
    known = sorted(qrels)[:4]
    (folder / "known.qrels").write_text("".join(f"{q} 0 {d} {qrels[(q, d)]}\n" for q, d in known))
    return {pair: qrels.get(pair, 0) for pair in pool}


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUNAL_")}
    if "TRIBUNAL_MODEL_DIR" in os.environ:
        env["TRIBUNAL_MODEL_DIR"] = os.environ["TRIBUNAL_MODEL_DIR"]
    env["TRIBUNAL_DATA_DIR"] = str(tmp_path / "data")
    return env


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tribunal.cli", "label", *args],
        env=env, cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def _evaluate(env: dict[str, str], folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return _cli(
        env, "evaluate", "--runs", str(folder / "BM25.trec"),
        str(folder / "SPLADE_P_P_ENSEMBLE_DISTIL.trec"), "--qrels", str(folder / "known.qrels"),
        "--topics", str(folder / "topics.tsv"), "--corpus", str(folder / "corpus.tsv"),
        "--job", "ev", "--depth", str(DEPTH), "--budget", "6", "--design", "uniform",
        "--no-progress", "--out", str(folder / "out"), *extra,
    )  # fmt: skip


@pytest.mark.models
# The estimator runs in tests/unit/test_ppi_estimator.py; this drives the CLI, the
# judge and the review queue end to end.
@pytest.mark.extended
@pytest.mark.timeout(900)
def test_evaluate_runs_then_tighten_with_reviews(tmp_path: Path) -> None:
    env = _env(tmp_path)
    folder = tmp_path / "trec"
    truth = _fixture(folder)
    first = _evaluate(env, folder)
    assert first.returncode == 0, first.stdout + first.stderr
    holes = len(truth) - 4
    assert f"{len(truth)} pooled pairs (4 in the qrels, {holes} holes for the judge" in first.stdout
    assert "Human labels: 0 of 6 sampled holes reviewed." in first.stdout
    report = json.loads((folder / "out" / "evaluation.json").read_text())
    assert report["ready"] is False
    assert report["drawn"] == 6

    store = JobStore.from_url(f"sqlite:///{tmp_path / 'data' / 'tribunal.db'}")
    try:
        items = {entry.item.item_id: entry for entry in store.items("ev")}
        assert len(items) == holes
        queued = [e for e in items.values() if e.result is not None and e.result.escalation_id]
        assert len(queued) == 6
        records = store.db.escalations(status=None)
        assert {r.reason for r in records} == {"evaluation-sample"}
        design = [r.history["evaluation"] for r in records]
        assert sorted(d["review_position"] for d in design) == list(range(6))
        assert {d["inclusion_probability"] for d in design} == {round(6 / holes, 8)}
        item_of = {e.result.escalation_id: e.item.item_id for e in queued if e.result}
        queue = ReviewQueue(store.db, votes_per_item=1, job="ev")
        while (item := queue.next_item("annotator-1")) is not None:
            qid, docid = item_of[item.key].split(":")
            relevant = truth[(qid, docid)] >= 2
            queue.vote("annotator-1", item.token, "relevant" if relevant else "irrelevant")
        votes = export_votes(store.db, job="ev")
    finally:
        store.close()
    assert len(votes) == 6
    (tmp_path / "votes.jsonl").write_text("".join(json.dumps(v) + "\n" for v in votes))
    merged = _cli(
        env, "aggregate", "--votes", str(tmp_path / "votes.jsonl"), "--method", "majority",
        "--job", "ev", "--out", str(tmp_path / "agg"),
    )  # fmt: skip
    assert merged.returncode == 0, merged.stdout + merged.stderr

    second = _evaluate(env, folder)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "Human labels: 6 of 6 sampled holes reviewed." in second.stdout
    assert "0 to label" in second.stdout  # the judge's labels are the job's: not redone
    report = json.loads((folder / "out" / "evaluation.json").read_text())
    assert report["ready"] is True
    assert {(m["run"], m["metric"]) for m in report["metrics"]} == {
        (run, metric)
        for run in ("BM25", "SPLADE_P_P_ENSEMBLE_DISTIL")
        for metric in ("nDCG@10", "P@10", "R@100")
    }
    for row in report["metrics"]:
        assert 0.0 <= row["ppi"]["low"] <= row["ppi"]["value"] <= row["ppi"]["high"] <= 1.0
    assert len(report["differences"]) == 3
    assert set(report["kendall_tau"]) == {"nDCG@10", "P@10", "R@100"}
    assert (folder / "out" / "evaluation.png").stat().st_size > 10_000

    other = _evaluate(env, folder, "--seed", "1")
    assert other.returncode == 2
    assert "evaluates other runs, qrels, depth or sample design" in other.stderr


def _refused(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    """Run ``tribunal label`` in this process (bad input never reaches a model, so a
    subprocess would only pay the start-up); the error it printed."""
    assert main(["label", *args]) == 2
    return capsys.readouterr().err


def test_bad_run_files_are_refused_with_the_place_to_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "t.tsv").write_text("1\tq\n")
    (tmp_path / "c.tsv").write_text("d1\tpassage\n")
    common = ["--topics", str(tmp_path / "t.tsv"), "--corpus", str(tmp_path / "c.tsv"),
              "--job", "bad", "--budget", "2"]  # fmt: skip
    missing = _refused(capsys, "evaluate", "--runs", str(tmp_path / "nope.trec"), *common)
    assert "nope.trec does not exist" in missing
    bad = tmp_path / "bad.trec"
    bad.write_text("1 Q0 d1 1 3.5 run\n1 Q0 d2 2 run\n")
    malformed = _refused(capsys, "evaluate", "--runs", str(bad), *common)
    assert f"{bad}:2: a run line is `qid Q0 docid rank score tag` (6 columns), got 5" in malformed
    budget = _refused(capsys, "evaluate", "--runs", str(bad), *common[:-1], "1")
    assert "--budget must be >= 2" in budget
