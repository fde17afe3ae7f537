"""The four aggregators on synthetic judges, thresholds, metrics, and the artifact round trip."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray
from tribunal.core import FailedPreconditionError, InvalidArgumentError
from tribunal.ensemble import EnsembleArtifact
from tribunal.ensemble._base import EnsembleInputs
from tribunal.ensemble._latent import LatentEnsemble
from tribunal.ensemble._majority import MajorityVote
from tribunal.ensemble._neural import NeuralGating
from tribunal.ensemble._training import fit_vote_thresholds, matching_metrics
from tribunal.ensemble._weighted import WeightedVote

FAST = {"hidden": 32, "max_epochs": 40, "patience": 10, "lr": 1e-2, "batch_size": 32}


def reliable_vs_correlated(
    rows: int, seed: int
) -> tuple[EnsembleInputs, NDArray[np.int64], NDArray[np.bool_]]:
    """Judge 0 is right 92% of the time; judges 1 and 2 copy one coin (right ~50%).

    Returns the inputs, the labels, and the rows where the reliable judge is outvoted
    by the two correlated ones.
    """
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, rows)
    reliable = np.where(rng.random(rows) < 0.92, labels, 1 - labels)
    coin = rng.integers(0, 2, rows)
    weak_a = np.where(rng.random(rows) < 0.95, coin, 1 - coin)
    weak_b = np.where(rng.random(rows) < 0.95, coin, 1 - coin)
    votes = np.stack([reliable, weak_a, weak_b], axis=1).astype(np.float32)
    p_yes = np.clip(votes * 0.6 + 0.2 + rng.normal(0, 0.05, votes.shape), 0, 1).astype(np.float32)
    embeddings = rng.normal(0, 1, (rows, 16)).astype(np.float32)
    outvoted = (weak_a == weak_b) & (weak_a != reliable)
    return EnsembleInputs(votes, p_yes, embeddings), labels.astype(np.int64), outvoted


@pytest.fixture(scope="module")
def synthetic() -> dict[str, tuple[EnsembleInputs, NDArray[np.int64], NDArray[np.bool_]]]:
    return {
        "train": reliable_vs_correlated(400, 1),
        "validation": reliable_vs_correlated(200, 2),
        "test": reliable_vs_correlated(400, 3),
    }


def _fit(aggregator, synthetic):  # type: ignore[no-untyped-def]
    train, validation = synthetic["train"], synthetic["validation"]
    return aggregator.fit(train[0], train[1], (validation[0], validation[1]))


def test_majority_follows_the_correlated_pair_and_fails(synthetic) -> None:  # type: ignore[no-untyped-def]
    inputs, labels, outvoted = synthetic["test"]
    majority = _fit(MajorityVote(), synthetic)
    predicted = majority.predict(inputs)
    # Where the reliable judge is outvoted, the majority takes the coin's side.
    assert (predicted[outvoted] == inputs.votes[outvoted, 1]).all()
    assert matching_metrics(labels, predicted)["accuracy"] < 0.75


@pytest.mark.parametrize(
    "aggregator",
    [
        WeightedVote(),
        NeuralGating(**FAST),
        LatentEnsemble(**FAST, train_samples=64, eval_samples=256),
    ],
    ids=["weighted", "neural", "latent"],
)
def test_learned_aggregators_follow_the_reliable_judge(aggregator, synthetic) -> None:  # type: ignore[no-untyped-def]
    inputs, labels, outvoted = synthetic["test"]
    fitted = _fit(aggregator, synthetic)
    predicted = fitted.predict(inputs)
    accuracy = matching_metrics(labels, predicted)["accuracy"]
    assert accuracy >= 0.85, fitted.fit_info_
    # On the rows where one reliable judge disagrees with two agreeing unreliable ones,
    # the trained aggregator sides with the reliable judge.
    follows = (predicted[outvoted] == inputs.votes[outvoted, 0]).mean()
    assert outvoted.sum() > 50
    assert follows >= 0.85


def test_torch_aggregators_are_deterministic_under_a_seed(synthetic) -> None:  # type: ignore[no-untyped-def]
    inputs = synthetic["test"][0]
    options = {**FAST, "max_epochs": 20, "train_samples": 32, "eval_samples": 64}
    first = _fit(LatentEnsemble(**options, seed=7), synthetic).predict_proba(inputs)
    second = _fit(LatentEnsemble(**options, seed=7), synthetic).predict_proba(inputs)
    np.testing.assert_array_equal(first, second)
    neural = {**FAST, "max_epochs": 20}
    np.testing.assert_array_equal(
        _fit(NeuralGating(**neural, seed=3), synthetic).predict_proba(inputs),
        _fit(NeuralGating(**neural, seed=3), synthetic).predict_proba(inputs),
    )


def test_artifact_round_trip_gives_identical_predictions(tmp_path: Path, synthetic) -> None:  # type: ignore[no-untyped-def]
    inputs = synthetic["test"][0]
    aggregators = {
        "majority": _fit(MajorityVote(), synthetic),
        "weighted": _fit(WeightedVote(), synthetic),
        "neural": _fit(NeuralGating(**{**FAST, "max_epochs": 30}), synthetic),
        "latent": _fit(
            LatentEnsemble(**{**FAST, "max_epochs": 30}, train_samples=32, eval_samples=128),
            synthetic,
        ),
    }
    artifact = EnsembleArtifact(
        judges=("a/ral2m", "b/ral2m", "c/ral2m"),
        vote_thresholds=np.array([0.5, 0.5, 0.5]),
        aggregators=aggregators,
        default_aggregator="latent",
        embedder="synthetic",
        dimension=16,
        data={"sha256": "x"},
        metrics={"note": 1.0},
    )
    version = artifact.save(tmp_path / "artifact")
    loaded = EnsembleArtifact.load(tmp_path / "artifact")
    assert loaded.version == version
    assert version.startswith("ens-")
    assert loaded.judges == artifact.judges
    assert loaded.default_aggregator == "latent"
    for name, aggregator in aggregators.items():
        np.testing.assert_array_equal(
            aggregator.predict_proba(inputs), loaded.aggregator(name).predict_proba(inputs)
        )
        np.testing.assert_array_equal(
            aggregator.predict(inputs), loaded.aggregator(name).predict(inputs)
        )
    # Saving the loaded artifact again gives the same version (content hash).
    assert loaded.save(tmp_path / "again") == version
    manifest = (tmp_path / "artifact" / "manifest.json").read_text()
    (tmp_path / "artifact" / "manifest.json").write_text(
        manifest.replace('"dimension": 16', '"dimension": 17', 1)
    )
    with pytest.raises(FailedPreconditionError, match="modified or damaged"):
        EnsembleArtifact.load(tmp_path / "artifact")


def test_unfitted_or_mismatched_inputs_are_refused(synthetic) -> None:  # type: ignore[no-untyped-def]
    inputs = synthetic["test"][0]
    with pytest.raises(InvalidArgumentError, match="not fitted"):
        WeightedVote().predict_proba(inputs)
    fitted = _fit(WeightedVote(), synthetic)
    with pytest.raises(InvalidArgumentError, match="3 judges") as caught:
        fitted.predict_proba(inputs.columns([0, 1]))
    assert caught.value.field == "judges"


def test_majority_ties_say_no_match() -> None:
    votes = np.array([[1, 0], [1, 1], [0, 0], [1, 0]], dtype=np.float32)
    inputs = EnsembleInputs(votes, votes, np.zeros((4, 2), np.float32))
    majority = MajorityVote().set_judges(2)
    assert majority.predict(inputs).tolist() == [0, 1, 0, 0]
    three = EnsembleInputs(
        np.array([[1, 1, 0]], np.float32),
        np.array([[1, 1, 0]], np.float32),
        np.zeros((1, 1), np.float32),
    )
    assert MajorityVote().set_judges(3).predict(three).tolist() == [1]


def test_vote_thresholds_separate_compressed_probabilities() -> None:
    # A small model's P(yes) lives in 0.2-0.4: at 0.5 it never votes yes.
    p_yes = np.array([[0.21], [0.25], [0.30], [0.33], [0.36], [0.39]], dtype=np.float32)
    labels = np.array([0, 0, 0, 1, 1, 1])
    threshold = fit_vote_thresholds(p_yes, labels)[0]
    assert 0.30 < threshold <= 0.33
    assert ((p_yes[:, 0] >= threshold).astype(int) == labels).all()


def test_matching_metrics_are_ral2ms() -> None:
    labels = np.array([1, 1, 1, 0, 0, 0, 0, 0])
    predicted = np.array([1, 1, 0, 1, 0, 0, 0, 0])
    m = matching_metrics(labels, predicted)
    assert m["accuracy"] == pytest.approx(6 / 8)
    assert m["hallucination"] == pytest.approx(1 / 5)  # false positive rate
    assert m["precision"] == pytest.approx(2 / 3)
    assert m["f1"] == pytest.approx(2 * (2 / 3) * (2 / 3) / (4 / 3))
