"""`tribunal label compare` on SQLite and a real PostgreSQL: exact figures of two jobs."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tribunal.core import InvalidArgumentError
from tribunal.core.storage import Database
from tribunal.jobs import JobStore, LabelItem, compare_jobs, comparison_markdown
from tribunal.jobs._store import ItemResult

# Gold grades of 8 items: 4 relevant (grade >= 2), 4 not; one more without gold (a hole).
GOLD = [3, 2, 2, 3, 0, 1, 0, 1, None]
ITEMS = [
    LabelItem(item_id=f"i{i}", query=f"q{i}", chunk=f"c{i}", gold=g) for i, g in enumerate(GOLD)
]
# judge job: says relevant to the first 6 → recalls 4/4 and 2/4, bAcc 0.75.
JUDGE = [ItemResult(f"i{i}", int(i < 6), "JUDGES", p_relevant=0.9 if i < 6 else 0.1,
                    tokens=100, seconds=1.0) for i in range(9)]  # fmt: skip
# cascade job: judges decide i0..i3 (right) and i8; the debate takes i4..i7: agrees and
# is right on i4, i6 (irrelevant), wrong on i5 (relevant); i7 escalates to humans.
CASCADE = [
    *(ItemResult(f"i{i}", 1, "JUDGES", p_relevant=0.9, tokens=100, seconds=1.0) for i in range(4)),
    ItemResult("i4", 0, "DEBATE", p_relevant=0.5, outcome="AGREED", tokens=1100, seconds=11.0),
    ItemResult("i5", 1, "DEBATE", p_relevant=0.5, outcome="AGREED", tokens=1100, seconds=11.0),
    ItemResult("i6", 0, "DEBATE", p_relevant=0.5, outcome="AGREED", tokens=1100, seconds=11.0),
    ItemResult("i7", None, "HUMAN_QUEUE", p_relevant=0.5, outcome="ESCALATED", tokens=1100,
               seconds=11.0),
    ItemResult("i8", 1, "JUDGES", p_relevant=0.9, tokens=100, seconds=1.0),
]  # fmt: skip


def _store(url: str) -> JobStore:
    store = JobStore(Database(url))
    for name, mode, results in (("judge", "judge", JUDGE), ("cascade", "cascade", CASCADE)):
        store.create_job(name, mode=mode, settings={}, source={"format": "jsonl"})
        store.add_items(name, ITEMS)
        store.record(name, results)
    return store


def test_compare_reports_exact_figures_and_the_paired_view(database_url: str) -> None:
    store = _store(database_url)
    report = compare_jobs(store, ["judge", "cascade"])
    judge, cascade = report["jobs"]
    assert (judge["items"], judge["finished"], judge["with_gold"], judge["kept"]) == (9, 9, 8, 8)
    assert judge["by_source"] == {"JUDGES": 9}
    assert judge["balanced_accuracy"]["value"] == pytest.approx(0.75)
    assert (judge["recall_relevant"], judge["recall_irrelevant"]) == (1.0, 0.5)
    assert (judge["escalated"], judge["debated"]) == (0.0, 0.0)
    assert (judge["tokens_per_item"], judge["model_seconds_per_item"]) == (100.0, 1.0)

    assert cascade["by_source"] == {"DEBATE": 3, "HUMAN_QUEUE": 1, "JUDGES": 5}
    assert cascade["escalated"] == pytest.approx(1 / 9)
    assert cascade["debated"] == pytest.approx(4 / 9)
    # kept with gold: i0..i6 → 4 relevant all right; 3 irrelevant (i4, i5?, i6): i5 is
    # grade 1 (irrelevant) and labelled relevant → recall irrelevant 2/3.
    assert cascade["kept"] == 7
    assert cascade["recall_relevant"] == 1.0
    assert cascade["recall_irrelevant"] == pytest.approx(2 / 3)
    assert cascade["balanced_accuracy"]["value"] == pytest.approx((1 + 2 / 3) / 2)
    assert cascade["tokens_per_item"] == pytest.approx((5 * 100 + 4 * 1100) / 9)
    low, high = cascade["balanced_accuracy"]["low"], cascade["balanced_accuracy"]["high"]
    assert low <= cascade["balanced_accuracy"]["value"] <= high

    (paired,) = report["paired"]
    # Debated and labelled: i4, i5, i6 (all gold-irrelevant: one class, no bAcc).
    assert (paired["debated_in"], paired["other"], paired["items"]) == ("cascade", "judge", 3)
    assert paired["positives"] == 0
    assert paired["debate_balanced_accuracy"] is None
    # judge says relevant on i4, i5 (i < 6), irrelevant on i6; debate 0, 1, 0.
    assert paired["agreement"] == pytest.approx(2 / 3)
    table = comparison_markdown(report)
    assert "| cascade | cascade | 9/9 |" in table
    assert "On the 3 items cascade sent to the debate" in table


def test_compare_names_the_jobs_it_knows(database_url: str) -> None:
    store = _store(database_url)
    with pytest.raises(InvalidArgumentError, match="no job named 'nope'; jobs in this store: "):
        compare_jobs(store, ["judge", "nope"])


def test_the_cli_writes_json_and_markdown(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'jobs.db'}"
    _store(url).close()
    out = tmp_path / "compare.json"
    done = subprocess.run(
        [sys.executable, "-m", "tribunal.cli", "label", "compare", "judge", "cascade",
         "--database-url", url, "--out", str(out)],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "| judge | judge | 9/9 | judges 9 |" in done.stdout
    assert out.is_file()
    assert out.with_suffix(".md").read_text() == done.stdout


def test_only_restricts_every_figure_to_the_listed_items(database_url: str) -> None:
    store = _store(database_url)
    # i0 (relevant, right), i4 and i5 (irrelevant; judge wrong on i4 and i5).
    report = compare_jobs(store, ["judge"], only=["i0", "i4", "i5", "unknown"])
    (judge,) = report["jobs"]
    assert (judge["items"], judge["kept"], report["only"]) == (3, 3, 4)
    assert (judge["recall_relevant"], judge["recall_irrelevant"]) == (1.0, 0.0)
    assert judge["balanced_accuracy"]["value"] == pytest.approx(0.5)
