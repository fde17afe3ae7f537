"""Resume: a `tribunal label run` killed with SIGKILL mid-run, resumed, labels every item once.

The job runs as a real subprocess (the CLI) in ``judge`` mode with one cheap relevance
judge (SmolLM2-135M's P(yes) and the MiniLM cosine, coefficients chosen by the test,
one thread) on 16 TREC DL 2019 pairs; the test polls the store until some but not all
items are labelled, kills the process with SIGKILL, and resumes it. Run on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from tribunal.core.storage import Database
from tribunal.core.storage._tables import AuditDecisionRow
from tribunal.jobs import JobStore
from tribunal.jobs._tables import JobItemRow

from tests.conftest import REPO, SHARED
from tests.integration._relevance import write_tiny_artifact

from ._llm_backend import LLM_BACKEND

ITEMS = 16
JOB = "resume-dl19"


def _items(path: Path) -> list[str]:
    """16 judged DL 2019 pairs from different queries (every 240th row)."""
    rows = [
        json.loads(line)
        for line in (SHARED / "data" / "trec-dl-2019" / "dl19_judged_pairs.jsonl")
        .read_text()
        .splitlines()
    ][::240][:ITEMS]
    for row in rows:
        row["passage"] = row["passage"][:600]  # bounds the model time per item
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return [f"{row['qid']}:{row['pid']}" for row in rows]


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRIBUNAL_")}
    # Not the shipped artifact (a 1.5B model): the 135M one, on the tests' backend.
    relevance = write_tiny_artifact(tmp_path / "relevance.json")
    if "TRIBUNAL_MODEL_DIR" in os.environ:
        env["TRIBUNAL_MODEL_DIR"] = os.environ["TRIBUNAL_MODEL_DIR"]
    env.update(
        {
            "TRIBUNAL_DATA_DIR": str(tmp_path / "data"),
            "TRIBUNAL_LLM_BACKEND": LLM_BACKEND,
            "TRIBUNAL_LLM__N_THREADS": "1",
            "TRIBUNAL_ENSEMBLE__JUDGES": '["llm_tiny/ral2m"]',
            "TRIBUNAL_ENSEMBLE__AGGREGATOR": "majority",
            "TRIBUNAL_ENSEMBLE__RELEVANCE_ARTIFACT": str(relevance),
        }
    )
    return env


def _command(url: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "tribunal.cli", "label", "run", "--job", JOB,
        "--database-url", url, "--workers", "1", "--batch-size", "1", "--no-progress", *extra,
    ]  # fmt: skip


def _finished(store: JobStore) -> int:
    return store.counts(JOB).finished if JOB in {j.name for j in store.jobs()} else 0


@pytest.mark.models
@pytest.mark.slow
# Storage portability is covered on both databases by test_jobs_store.py; CI runs the
# kill-and-resume on PostgreSQL and `make test-all` on SQLite too (CI time budget).
@pytest.mark.parametrize(
    "database_url",
    [
        pytest.param("sqlite", marks=pytest.mark.extended),
        pytest.param("postgresql", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
def test_a_killed_job_resumes_and_labels_every_item_once(database_url: str, tmp_path: Path) -> None:
    input_ids = _items(tmp_path / "items.jsonl")
    env = _env(tmp_path)
    store = JobStore(Database(database_url))
    started = time.perf_counter()
    process = subprocess.Popen(
        _command(database_url, "--input", str(tmp_path / "items.jsonl"), "--mode", "judge"),
        env=env,
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while _finished(store) < ITEMS // 2:
            assert process.poll() is None, process.communicate()[0]
            assert time.monotonic() < deadline, "no item was labelled within 5 minutes"
            time.sleep(0.05)
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.wait()
    assert process.returncode == -signal.SIGKILL
    killed_at = store.counts(JOB)
    assert ITEMS // 2 <= killed_at.finished < ITEMS, "the kill must come mid-run"
    assert store.job(JOB).status == "running"
    before = {e.item.item_id: e for e in store.items(JOB, finished=True)}

    # Starting the same job again without --resume is refused, saying what to do.
    refused = subprocess.run(
        _command(database_url, "--input", str(tmp_path / "items.jsonl")),
        env=env, cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused.returncode == 2
    assert "already exists; pass --resume" in refused.stderr

    report_path, out = tmp_path / "report.json", tmp_path / "out"
    resumed = subprocess.run(
        _command(database_url, "--resume", "--report", str(report_path), "--out", str(out)),
        env=env, cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    seconds = time.perf_counter() - started
    report = json.loads(report_path.read_text())
    # Exactly the items left at the kill were labelled by the resumed run (an item being
    # labelled when the kill came is among them: it had no result yet).
    assert report["labelled"] == ITEMS - killed_at.finished
    assert report["already_done"] == 0
    assert report["remaining"] == 0

    with store.db.session() as session:
        rows = session.scalars(select(JobItemRow).where(JobItemRow.job == JOB)).all()
        ids = [row.item_id for row in rows]
        assert len(rows) == ITEMS
        assert sorted(ids) == sorted(input_ids)
        assert len(set(ids)) == ITEMS
        assert all(row.finished_at is not None for row in rows)
        assert all(row.label in (0, 1) or row.escalation_id for row in rows)
        assert all(row.source == "JUDGES" and row.tokens and row.tokens > 0 for row in rows)
        audits = session.scalar(
            select(func.count())
            .select_from(AuditDecisionRow)
            .where(AuditDecisionRow.kind == "label")
        )
    # Every item has its audit record; the item in flight at the kill (and, at worst, one
    # finished but not yet written) are audited twice: the audit log keeps every decision.
    assert ITEMS <= (audits or 0) <= ITEMS + 2
    # Results written before the kill were kept, not re-labelled.
    after = {e.item.item_id: e for e in store.items(JOB, finished=True)}
    for item_id, entry in before.items():
        assert after[item_id].finished_at == entry.finished_at
        assert after[item_id].result == entry.result
    counts = store.counts(JOB)
    assert (counts.total, counts.finished, counts.pending) == (ITEMS, ITEMS, 0)
    assert store.job(JOB).status == "done"
    qrels = (out / "qrels.txt").read_text().splitlines()
    assert len(qrels) == ITEMS
    assert (out / "qrels.holes.txt").read_text() == ""  # every DL19 pair is judged
    print(
        f"\nresume figures: {ITEMS} items, killed after {killed_at.finished} labelled, "
        f"resumed run labelled {report['labelled']} in {report['wall_seconds']} s "
        f"(+{report['load_seconds']} s loading); whole test {seconds:.1f} s"
    )
    store.close()
