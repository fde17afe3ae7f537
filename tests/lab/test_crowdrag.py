"""The CrowdRAG-25 reproduction: the authors' ratings, their MACE port, Table 4's α and
``tribunal-lab crowdrag`` end to end (on the shared data set)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tribunal.core import InvalidArgumentError
from tribunal.jobs._aggregate import agreement
from tribunal_lab.cli import main
from tribunal_lab.crowdrag import (
    CROWDRAG_DIMENSIONS,
    CROWDRAG_PAPER_ALPHA,
    SCALE,
    _corrected_alpha,
    authors_mace,
    read_crowdrag,
)

from tests.conftest import SHARED
from tests.unit.test_aggregate import _spammer_set

CROWDRAG = SHARED / "data" / "crowdrag25" / "ratings.jsonl.gz"


def test_the_authors_mace_port_finds_the_truth() -> None:
    """The port of the CrowdRAG authors' MACE (used only to show their seed variance)."""
    votes, truth = _spammer_set()
    labels = authors_mace(votes, ("a", "b", "c"), np.random.default_rng(0), n_restarts=3)
    assert labels.to_dict() == truth


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
    iterations, 1 re-run of the authors' MACE); docs/results/ has the full run."""
    out = tmp_path / "crowdrag"
    argv = ["crowdrag", "--ratings", str(CROWDRAG), "--dimensions", "quality_overall"]
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
