"""`tribunal label run --ray`: Ray Data map_batches on an actor pool, results in the store."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from tribunal.core.storage import Database
from tribunal.jobs import JobStore

from tests.conftest import REPO, SHARED
from tests.integration.test_jobs_resume import _env

pytestmark = pytest.mark.ray


@pytest.mark.models
@pytest.mark.slow
# ~100 s, most of it Ray's start: the runner's code paths are shared with the local
# pool tested in CI; `make test-all` runs this one (CI time budget).
@pytest.mark.extended
def test_a_job_on_ray_labels_every_item_once(tmp_path: Path) -> None:
    rows = (SHARED / "data" / "trec-dl-2019" / "dl19_judged_pairs.jsonl").read_text().splitlines()
    (tmp_path / "items.jsonl").write_text("\n".join(rows[:4]) + "\n")
    ids = [f"{r['qid']}:{r['pid']}" for r in map(json.loads, rows[:4])]
    url = f"sqlite:///{tmp_path}/jobs.db"
    env = {**_env(tmp_path), "RAY_TMPDIR": str(REPO / ".build" / "ray")}
    command = [
        sys.executable, "-m", "tribunal.cli", "label", "run", "--job", "on-ray", "--ray",
        "--workers", "1", "--batch-size", "2", "--mode", "judge", "--no-progress",
        "--input", str(tmp_path / "items.jsonl"), "--database-url", url,
        "--report", str(tmp_path / "report.json"), "--out", str(tmp_path / "out"),
    ]  # fmt: skip
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert (report["runner"], report["workers"], report["labelled"]) == ("ray", 1, 4)
    assert report["remaining"] == 0
    store = JobStore(Database(url))
    entries = list(store.items("on-ray"))
    assert [e.item.item_id for e in entries] == ids
    assert all(e.result is not None and e.result.label in (0, 1) for e in entries)
    assert all(e.result is not None and e.result.tokens > 0 for e in entries)
    assert store.job("on-ray").status == "done"
    store.close()
    assert len((tmp_path / "out" / "qrels.txt").read_text().splitlines()) == 4
