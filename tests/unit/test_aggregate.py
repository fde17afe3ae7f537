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
from tribunal.jobs._crowdrag import (
    CROWDRAG_DIMENSIONS,
    CROWDRAG_PAPER_ALPHA,
    SCALE,
    _corrected_alpha,
    authors_mace,
    read_crowdrag,
)

from tests.conftest import SHARED

CROWDRAG = SHARED / "data" / "crowdrag25" / "ratings.jsonl.gz"


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


def test_the_authors_mace_port_finds_the_truth() -> None:
    """The port of the CrowdRAG authors' MACE (used only to show their seed variance)."""
    votes, truth = _spammer_set()
    labels = authors_mace(votes, ("a", "b", "c"), np.random.default_rng(0), n_restarts=3)
    assert labels.to_dict() == truth


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


# -- CrowdRAG-25 -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def crowdrag() -> object:
    return read_crowdrag(CROWDRAG)


def test_crowdrag_reader_counts(crowdrag: object) -> None:
    ratings = crowdrag
    assert ratings.n_tasks == 1352  # type: ignore[attr-defined]
    assert ratings.n_workers == 420  # type: ignore[attr-defined]
    assert len(ratings.votes) == 1352 * 5 * 7  # type: ignore[attr-defined]
    assert ratings.pairs["submission_id"].nunique() == 90  # type: ignore[attr-defined]
    assert ratings.pairs["query_id"].nunique() == 65  # type: ignore[attr-defined]
    votes = ratings.dimension_votes("correctness_topical")  # type: ignore[attr-defined]
    assert votes["label"].value_counts().to_dict() == {"b": 2427, "a": 2303, "n": 2030}
    gold = ratings.gold_labels("correctness_topical")  # type: ignore[attr-defined]
    assert gold.value_counts().to_dict() == {"b": 516, "a": 458, "n": 378}
    quality = ratings.dimension_votes("quality_overall")  # type: ignore[attr-defined]
    assert set(quality["label"]) == {"a", "b"}
    spam = ratings.spam_probability("coherence_logical")  # type: ignore[attr-defined]
    assert len(spam) == 420
    first = "61fd722e-9189-3249-8e9c-c60a257aa7b1"
    assert spam[first] == pytest.approx(0.0157193547)
    with pytest.raises(InvalidArgumentError, match="unknown CrowdRAG-25 dimension"):
        ratings.gold_labels("fluency")  # type: ignore[attr-defined]


@pytest.mark.parametrize("dimension", CROWDRAG_DIMENSIONS)
def test_crowdrag_alpha_matches_the_paper(crowdrag: object, dimension: str) -> None:
    """Table 4 of the paper, α(C) and α(C*), to the two digits it prints."""
    ratings = crowdrag
    votes = ratings.dimension_votes(dimension)  # type: ignore[attr-defined]
    alpha = agreement(votes, SCALE, ordinal=True).alpha_ordinal
    assert alpha is not None
    paper, paper_corrected = CROWDRAG_PAPER_ALPHA[dimension]
    assert round(alpha, 2) == paper
    spam = ratings.spam_probability(dimension)  # type: ignore[attr-defined]
    corrected = _corrected_alpha(votes, spam, ratings.pairs, SCALE)  # type: ignore[attr-defined]
    assert corrected == pytest.approx(ALPHA_CORRECTED[dimension], abs=5e-5)
    # Six of seven round to the paper's two digits; coverage_broad gives 0.4349 for 0.44.
    assert abs(ALPHA_CORRECTED[dimension] - paper_corrected) < 0.0055


# α(C*) from the authors' published spam probabilities (their filter: ≤ 0.7, one
# direction per unordered pair, the first in file order).
ALPHA_CORRECTED = {
    "correctness_topical": 0.4264,
    "coherence_logical": 0.3915,
    "coherence_stylistic": 0.3826,
    "coverage_broad": 0.4349,
    "coverage_deep": 0.4458,
    "consistency_internal": 0.4195,
    "quality_overall": 0.3930,
}


def test_crowdrag_command_writes_the_reproduction(tmp_path: Path) -> None:
    """The reproduction command end to end on one dimension, cut short (1 restart, 5
    iterations, 1 re-run of the authors' MACE); docs/results.md has the full run."""
    out = tmp_path / "crowdrag"
    argv = ["label", "aggregate", "--crowdrag", str(CROWDRAG), "--dimensions", "quality_overall"]
    argv += ["--restarts", "1", "--iterations", "5", "--replicates", "1", "--no-progress"]
    assert main([*argv, "--out", str(out)]) == 0
    document = json.loads((out / "crowdrag.json").read_text())
    assert (document["n_tasks"], document["n_workers"]) == (1352, 420)
    [report] = document["dimensions"]
    assert report["dimension"] == "quality_overall"
    assert report["paper_alpha"] == 0.17
    assert round(report["alpha_ordinal"], 3) == 0.169
    assert report["majority_agreement"] == pytest.approx(0.868, abs=5e-4)
    assert report["gold_from_their_competence"] == pytest.approx(0.999, abs=5e-4)
    assert report["disagree_no_majority"] == 0  # 5 binary votes always have a majority
    assert len(report["replicate_gold_agreement"]) == 1
    rows = (out / "crowdrag_labels.jsonl").read_text().splitlines()
    assert len(rows) == 1352
    assert "| quality_overall |" in (out / "crowdrag.md").read_text()
