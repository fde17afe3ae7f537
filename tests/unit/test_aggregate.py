"""Label aggregation: exact labels, competences and agreement on fixed vote tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from tribunal.cli import main
from tribunal.core import InvalidArgumentError
from tribunal.jobs._aggregate import Agreement, aggregate, agreement, read_votes


def _votes(rows: list[tuple[str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["task", "worker", "label"])


def _table(counts: list[list[int]], labels: list[str]) -> pd.DataFrame:
    """Votes from a task × label count table; rater j gives the j-th vote of each task."""
    rows = []
    for t, row in enumerate(counts):
        answers = [label for label, n in zip(labels, row, strict=True) for _ in range(n)]
        rows += [(f"t{t:02d}", f"r{j:02d}", label) for j, label in enumerate(answers)]
    return _votes(rows)


# -- majority ---------------------------------------------------------------------------


TIES = _votes(
    [
        ("t1", "w1", "a"),
        ("t1", "w2", "b"),  # 1-1 tie
        ("t2", "w1", "a"),
        ("t2", "w2", "a"),
        ("t2", "w3", "b"),
        ("t3", "w1", "n"),
        ("t3", "w2", "b"),
        ("t3", "w3", "b"),
        ("t4", "w2", "n"),
        ("t4", "w3", "b"),  # 1-1 tie between n and b
    ]
)


def test_majority_breaks_ties_by_label_order() -> None:
    result = aggregate(TIES, "majority", labels=("a", "n", "b"))
    assert result.labels.to_dict() == {"t1": "a", "t2": "a", "t3": "b", "t4": "n"}
    assert result.tied.to_dict() == {"t1": True, "t2": False, "t3": False, "t4": True}
    assert result.probabilities.loc["t2"].tolist() == pytest.approx([2 / 3, 0.0, 1 / 3])
    assert result.confidence.to_dict() == pytest.approx(
        {"t1": 0.5, "t2": 2 / 3, "t3": 2 / 3, "t4": 0.5}
    )
    # Competence: share of the worker's votes equal to the final label.
    assert result.competence.to_dict() == pytest.approx({"w1": 2 / 3, "w2": 3 / 4, "w3": 1 / 3})

    reversed_order = aggregate(TIES, "majority", labels=("b", "n", "a"))
    assert reversed_order.labels.to_dict() == {"t1": "b", "t2": "a", "t3": "b", "t4": "b"}
    # Default order: the sorted labels seen (a < b < n).
    assert aggregate(TIES, "majority").labels.to_dict()["t4"] == "b"


def test_majority_does_not_depend_on_row_order() -> None:
    shuffled = TIES.sample(frac=1.0, random_state=3)
    a = aggregate(TIES, "majority", labels=("a", "n", "b")).labels
    b = aggregate(shuffled, "majority", labels=("a", "n", "b")).labels
    assert a.sort_index().to_dict() == b.sort_index().to_dict()


# -- MACE and Dawid–Skene on a set with a spammer ----------------------------------------


def _spammer_set() -> tuple[pd.DataFrame, dict[str, str]]:
    """30 tasks with a seeded true label in a/b/c. Workers w1–w4 are right except on
    three tasks each (w_j errs on tasks i ≡ 2j+1 mod 10, answering the next label), so
    three good votes out of four always agree; w5 answers "a" whatever the task."""
    rng = np.random.default_rng(12)
    labels = ["a", "b", "c"]
    truth = {f"t{i:02d}": labels[int(rng.integers(3))] for i in range(30)}
    rows = []
    for i, (task, label) in enumerate(truth.items()):
        for j, worker in enumerate(("w1", "w2", "w3", "w4")):
            wrong = i % 10 == 2 * j + 1
            answer = labels[(labels.index(label) + 1) % 3] if wrong else label
            rows.append((task, worker, answer))
        rows.append((task, "w5", "a"))
    return _votes(rows), truth


@pytest.mark.parametrize("method", ["mace", "ds", "majority"])
def test_the_truth_and_the_spammer(method: str) -> None:
    votes, truth = _spammer_set()
    result = aggregate(votes, method, seed=0, n_restarts=5, n_iter=50)
    assert result.labels.to_dict() == truth
    assert not result.tied.any()
    competence = result.competence.sort_values()
    assert competence.index[0] == "w5"
    # Each good worker is right on 27 of 30 tasks; the spammer on the "a" tasks only.
    n_a = sum(label == "a" for label in truth.values())
    if method == "majority":
        assert competence.to_dict() == pytest.approx(
            {"w1": 0.9, "w2": 0.9, "w3": 0.9, "w4": 0.9, "w5": n_a / 30}
        )
    else:
        assert competence["w5"] < 0.5 < competence.drop("w5").min()


def test_mace_is_reproducible_and_independent_of_row_order() -> None:
    votes, _ = _spammer_set()
    first = aggregate(votes, "mace", seed=7, n_restarts=4, n_iter=30)
    again = aggregate(votes, "mace", seed=7, n_restarts=4, n_iter=30)
    pd.testing.assert_frame_equal(first.probabilities, again.probabilities)
    # crowd-kit 1.4.2's MACE mixes up workers when their order of first appearance is
    # not their sorted order; the integer codes we pass keep the two orders equal.
    shuffled = aggregate(
        votes.sample(frac=1.0, random_state=5), "mace", seed=7, n_restarts=4, n_iter=30
    )
    pd.testing.assert_series_equal(
        first.competence.sort_index(), shuffled.competence.sort_index(), atol=1e-9
    )
    assert first.labels.sort_index().to_dict() == shuffled.labels.sort_index().to_dict()
    assert len(first.restart_log_likelihoods) == 4
    assert first.log_likelihood == max(first.restart_log_likelihoods)
    assert first.hyperparameters["n_restarts"] == 4


# -- agreement ------------------------------------------------------------------------------


def test_fleiss_kappa_textbook_example() -> None:
    # Fleiss (1971) as tabulated on Wikipedia's "Fleiss' kappa": 10 subjects, 14 raters.
    counts = [
        [0, 0, 0, 0, 14],
        [0, 2, 6, 4, 2],
        [0, 0, 3, 5, 6],
        [0, 3, 9, 2, 0],
        [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0],
        [3, 2, 6, 3, 0],
        [2, 5, 3, 2, 2],
        [6, 5, 2, 1, 0],
        [0, 2, 2, 3, 7],
    ]
    result = agreement(_table(counts, ["1", "2", "3", "4", "5"]))
    assert result.fleiss_kappa is not None
    assert round(result.fleiss_kappa, 3) == 0.210
    assert result.n_pairable_tasks == 10


def test_krippendorff_alpha_textbook_example() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability", section C:
    # 4 observers, 12 units, missing values; α nominal 0.743, ordinal 0.815.
    observers = {
        "A": [1, 2, 3, 3, 2, 1, 4, 1, 2, None, None, None],
        "B": [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, None, 3],
        "C": [None, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, None],
        "D": [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, None],
    }
    votes = _votes(
        [
            (f"u{unit:02d}", observer, str(value))
            for observer, values in observers.items()
            for unit, value in enumerate(values)
            if value is not None
        ]
    )
    result = agreement(votes, ["1", "2", "3", "4", "5"], ordinal=True)
    assert result.alpha_nominal is not None
    assert round(result.alpha_nominal, 3) == 0.743
    assert result.alpha_ordinal is not None
    assert round(result.alpha_ordinal, 3) == 0.815
    assert result.fleiss_kappa is None  # units have 1 to 4 values
    assert result.n_pairable_tasks == 11  # unit 12 has a single value

    # crowd-kit's own (nominal, NLTK) α agrees with the krippendorff package.
    from crowdkit.metrics.data import alpha_krippendorff

    assert alpha_krippendorff(votes) == pytest.approx(result.alpha_nominal, abs=1e-9)


def test_agreement_is_undefined_without_two_votes_on_a_task() -> None:
    result = aggregate(_votes([("t1", "w1", "a"), ("t2", "w2", "b")]), "majority")
    assert result.agreement == Agreement(None, None, None, 0)
    assert result.labels.to_dict() == {"t1": "a", "t2": "b"}


# -- input checks -------------------------------------------------------------------------


def test_bad_vote_tables_say_what_to_fix() -> None:
    with pytest.raises(InvalidArgumentError, match="voted more than once"):
        aggregate(_votes([("t", "w", "a"), ("t", "w", "b")]), "majority")
    with pytest.raises(InvalidArgumentError, match="not in the declared label set"):
        aggregate(_votes([("t", "w", "x")]), "majority", labels=("a", "b"))
    with pytest.raises(InvalidArgumentError, match="missing: label"):
        aggregate(pd.DataFrame({"task": ["t"], "worker": ["w"]}), "majority")
    with pytest.raises(InvalidArgumentError, match="unknown aggregation method"):
        aggregate(TIES, "vote")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="unknown aggregation settings"):
        aggregate(TIES, "mace", restarts=3)


def test_read_votes_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "votes.jsonl"
    path.write_text(
        "\n".join(
            json.dumps({"task": t, "worker": w, "label": x, "job": "j"})
            for t, w, x in TIES.itertuples(index=False)
        )
        + "\n"
    )
    assert read_votes(path).equals(TIES)
    out = tmp_path / "out"
    code = main(
        [
            "label",
            "aggregate",
            "--votes",
            str(path),
            "--method",
            "majority",
            "--labels",
            "a,n,b",
            "--ordinal",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    document = json.loads((out / "aggregate.json").read_text())
    assert document["summary"]["label_counts"] == {"a": 2, "n": 1, "b": 1}
    assert document["summary"]["n_tied"] == 2
    assert [t["label"] for t in document["tasks"]] == ["a", "a", "b", "n"]
    assert document["competence"] == {"w3": 0.333333, "w1": 0.666667, "w2": 0.75}
    assert "| majority | 4 | 3 | 10 | 2 |" in (out / "aggregate.md").read_text()
    assert json.loads(capsys.readouterr().out)["n_votes"] == 10

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"task": "t", "worker": "w"}\n')
    with pytest.raises(InvalidArgumentError, match=r"bad.jsonl:1: each line needs"):
        read_votes(bad)
