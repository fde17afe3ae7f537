"""Two `tribunal label run` processes on one job split the items: each labelled once.

Both runners are real CLI subprocesses in ``judge`` mode with one cheap relevance judge
(SmolLM2-135M's P(yes) and the MiniLM cosine, one thread each), on 16 TREC DL 2019
pairs; the second joins with ``--resume`` while the first runs. Model calls are counted
from the audit trail (one ``label`` decision per labelling call) and from each runner's
report (items it claimed and sent to the model).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from tribunal.core.storage import Database
from tribunal.core.storage._tables import AuditDecisionRow
from tribunal.jobs import JobStore
from tribunal.jobs._tables import JobItemRow

from tests.conftest import REPO
from tests.integration.test_jobs_resume import ITEMS, JOB, _command, _env, _items


@pytest.mark.models
@pytest.mark.slow
@pytest.mark.parametrize(
    "database_url",
    [
        pytest.param("sqlite", marks=pytest.mark.extended),
        pytest.param("postgresql", marks=pytest.mark.postgres),
    ],
    indirect=True,
)
def test_two_runners_label_every_item_once(database_url: str, tmp_path: Path) -> None:
    input_ids = _items(tmp_path / "items.jsonl")
    env = _env(tmp_path)
    store = JobStore(Database(database_url))
    reports = [tmp_path / "first.json", tmp_path / "second.json"]
    started = time.perf_counter()
    first = subprocess.Popen(
        _command(
            database_url,
            *("--input", str(tmp_path / "items.jsonl"), "--mode", "judge"),
            *("--report", str(reports[0]), "--out", str(tmp_path / "out1")),
        ),
        env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    second = None
    try:
        deadline = time.monotonic() + 300
        while JOB not in {j.name for j in store.jobs()} or store.counts(JOB).total < ITEMS:
            assert first.poll() is None, first.communicate()[0]
            assert time.monotonic() < deadline, "the first runner never registered the job"
            time.sleep(0.05)
        second = subprocess.Popen(
            _command(
                database_url, "--resume",
                *("--report", str(reports[1]), "--out", str(tmp_path / "out2")),
            ),
            env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        outputs = [first.communicate(timeout=900)[0], second.communicate(timeout=900)[0]]
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait()
    assert first.returncode == 0, outputs[0]
    assert second.returncode == 0, outputs[1]
    seconds = time.perf_counter() - started
    runs = [json.loads(path.read_text()) for path in reports]

    # Each item went to the model once, across both runners, and was written once.
    assert sum(run["claimed"] for run in runs) == ITEMS
    assert sum(run["labelled"] for run in runs) == ITEMS
    assert [run["already_done"] for run in runs] == [0, 0]
    with store.db.session() as session:
        rows = session.scalars(select(JobItemRow).where(JobItemRow.job == JOB)).all()
        audits = session.scalar(
            select(func.count())
            .select_from(AuditDecisionRow)
            .where(AuditDecisionRow.kind == "label")
        )
    assert sorted(row.item_id for row in rows) == sorted(input_ids)
    assert all(row.finished_at is not None and row.source == "JUDGES" for row in rows)
    assert all(row.lease_owner is None for row in rows)
    assert audits == ITEMS  # one labelling call (one model call) per item, no repeat
    assert store.job(JOB).status == "done"
    print(
        f"\ntwo runners: {ITEMS} items; first claimed {runs[0]['claimed']} "
        f"({runs[0]['wall_seconds']} s labelling), second {runs[1]['claimed']} "
        f"({runs[1]['wall_seconds']} s); {audits} labelling calls in the audit trail; "
        f"whole test {seconds:.1f} s"
    )
    store.close()
