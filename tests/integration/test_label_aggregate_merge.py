"""``tribunal label aggregate --job``: aggregated human labels land on the job's items
(SQLite and a real PostgreSQL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.core.storage import Database
from tribunal.jobs import JobStore, LabelItem
from tribunal.jobs._store import ItemResult


def _job(url: str) -> JobStore:
    store = JobStore(Database(url))
    store.create_job("agg", mode="cascade", settings={}, source={"path": "x.jsonl"})
    store.add_items(
        "agg", [LabelItem(item_id=f"i{i}", query=f"q{i}", chunk=f"c{i}") for i in (1, 2, 3, 4)]
    )
    # i2 and i3 went to the human queue: the review export names them by escalation id.
    store.record(
        "agg",
        [
            ItemResult(item_id="i2", label=None, source="HUMAN_QUEUE", escalation_id="esc2"),
            ItemResult(item_id="i3", label=None, source="HUMAN_QUEUE", escalation_id="esc3"),
            ItemResult(item_id="i4", label=1, source="JUDGES"),
        ],
    )
    return store


def _write(path: Path, votes: list[tuple[str, str, str]]) -> Path:
    path.write_text(
        "".join(json.dumps({"task": t, "worker": w, "label": x}) + "\n" for t, w, x in votes)
    )
    return path


def test_majority_labels_are_merged_into_the_job(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _job(database_url)
    votes = _write(
        tmp_path / "votes.jsonl",
        [
            ("esc2", "ann1", "relevant"),
            ("esc2", "ann2", "relevant"),
            ("esc2", "ann3", "irrelevant"),
            ("esc3", "ann1", "irrelevant"),
            ("esc3", "ann2", "irrelevant"),
            ("esc3", "ann3", "relevant"),
            ("i1", "ann1", "relevant"),  # a task may also name the item itself
            ("ghost", "ann1", "relevant"),  # no such item: reported, not written
        ],
    )
    argv = ["label", "aggregate", "--votes", str(votes), "--method", "majority"]
    argv += ["--job", "agg", "--database-url", database_url, "--out", str(tmp_path / "out")]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["merge"] == {"merged": 3, "unmatched": 1}

    human = {
        entry.item.item_id: (entry.human_label, entry.human_method) for entry in store.items("agg")
    }
    assert human == {
        "i1": (1, "majority"),
        "i2": (1, "majority"),
        "i3": (0, "majority"),
        "i4": (None, None),
    }
    assert store.counts("agg").human_labelled == 3
    store.close()


def test_merge_refuses_non_binary_labels_and_unknown_jobs(
    database_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = _job(database_url)
    graded = _write(tmp_path / "graded.jsonl", [("esc2", "ann1", "2")])
    argv = ["label", "aggregate", "--method", "majority", "--database-url", database_url]
    argv += ["--out", str(tmp_path / "out")]
    assert main([*argv, "--votes", str(graded), "--job", "agg"]) == 2
    assert "a job takes relevant/irrelevant (or 1/0)" in capsys.readouterr().err
    ok = _write(tmp_path / "ok.jsonl", [("esc2", "ann1", "relevant")])
    assert main([*argv, "--votes", str(ok), "--job", "nope"]) == 2
    assert "no label job 'nope'" in capsys.readouterr().err
    assert store.counts("agg").human_labelled == 0
    store.close()
