"""Calibrators and their artifact: fits that match scikit-learn/scipy, exact round trips."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import special
from sklearn.isotonic import IsotonicRegression
from sklearn.linear_model import LogisticRegression
from sklearn.preprocessing import StandardScaler
from tribunal.confidence import CalibratorArtifact, FitConfig, Signals, fit_artifact
from tribunal.confidence._calibrators import (
    IsotonicCalibrator,
    PlattCalibrator,
    TemperatureCalibrator,
)
from tribunal.confidence._features import FeatureSpace
from tribunal.core import FailedPreconditionError, InvalidArgumentError, NotFoundError

from tests.unit._confidence_data import synthetic_data, synthetic_signals

KINDS = ("platt", "isotonic", "temperature")


def _config(kind: str, **changes: object) -> FitConfig:
    return FitConfig(**{"calibrator": kind, "score": "ensemble_p_match", **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", KINDS)
def test_artifact_round_trip_predicts_identically(kind: str, tmp_path: Path) -> None:
    artifact = fit_artifact(synthetic_data(), _config(kind))
    probe, _ = synthetic_signals(100, seed=9)
    path = artifact.save(tmp_path / "calibrator.json")
    loaded = CalibratorArtifact.load(path)
    assert np.array_equal(loaded.predict(probe), artifact.predict(probe))
    assert loaded.version == artifact.version
    assert loaded.version.startswith(f"{kind}-")
    assert loaded.thresholds == artifact.thresholds
    document = json.loads(path.read_text())
    assert document["calibrator"]["type"] == kind
    assert document["training_data"]["sha256"] == "synthetic-400-0"
    assert set(document) >= {"version", "created", "features", "config", "metrics", "thresholds"}


def test_the_version_comes_from_the_content() -> None:
    first = fit_artifact(synthetic_data(), _config("platt"), created="2026-11-29T00:00:00+00:00")
    again = fit_artifact(synthetic_data(), _config("platt"), created="2026-11-30T00:00:00+00:00")
    other_seed = fit_artifact(synthetic_data(), _config("platt", seed=1))
    assert first.version == again.version
    assert first.version != other_seed.version


def test_an_edited_or_absent_artifact_is_refused(tmp_path: Path) -> None:
    path = fit_artifact(synthetic_data(), _config("temperature")).save(tmp_path / "a.json")
    document = json.loads(path.read_text())
    document["calibrator"]["parameters"]["temperature"] = 0.5
    path.write_text(json.dumps(document))
    with pytest.raises(FailedPreconditionError, match="does not match its version"):
        CalibratorArtifact.load(path)
    with pytest.raises(NotFoundError, match="tribunal confidence fit"):
        CalibratorArtifact.load(tmp_path / "absent.json")


def test_platt_equals_scikit_learn_on_the_imputed_standardised_vector() -> None:
    signals, labels = synthetic_signals()
    calibrator = PlattCalibrator().fit(signals, labels)
    features = calibrator.space_.transform(signals)
    scaler = StandardScaler().fit(features)
    model = LogisticRegression(C=1.0, max_iter=1000).fit(scaler.transform(features), labels)
    expected = model.predict_proba(scaler.transform(features))[:, 1]
    assert np.allclose(calibrator.predict(signals), expected, atol=1e-12)


def test_isotonic_equals_scikit_learn_and_is_monotone() -> None:
    signals, labels = synthetic_signals()
    calibrator = IsotonicCalibrator(score="dense_score").fit(signals, labels)
    scores = np.array([s.dense_score for s in signals])
    reference = IsotonicRegression(y_min=0, y_max=1, out_of_bounds="clip").fit(scores, labels)
    assert np.allclose(calibrator.predict(signals), reference.predict(scores), atol=1e-12)
    grid = [Signals(dense_score=float(x)) for x in np.linspace(-0.5, 1.5, 41)]
    assert (np.diff(calibrator.predict(grid)) >= 0).all()


def test_temperature_recovers_a_known_temperature() -> None:
    # Labels drawn from σ(logit(s) / 2): the NLL fit must find T ≈ 2.
    rng = np.random.default_rng(3)
    scores = rng.uniform(0.02, 0.98, 4000)
    labels = (rng.random(4000) < special.expit(special.logit(scores) / 2.0)).astype(int)
    signals = [Signals(ensemble_p_match=float(s)) for s in scores]
    calibrator = TemperatureCalibrator().fit(signals, labels)
    assert calibrator.temperature_ == pytest.approx(2.0, abs=0.15)

    def nll(t: float) -> float:
        z = special.logit(scores) / t
        return float(np.mean(np.logaddexp(0, z) - labels * z))

    fitted = calibrator.temperature_
    assert nll(fitted) <= min(nll(fitted * 1.01), nll(fitted / 1.01))


def test_temperature_refuses_a_score_that_is_not_a_probability() -> None:
    signals = [Signals(dense_score=-0.2), Signals(dense_score=0.7)]
    with pytest.raises(InvalidArgumentError, match="logit of a probability") as caught:
        TemperatureCalibrator(score="dense_score").fit(signals, [0, 1])
    assert caught.value.field == "data[0].signals.dense_score"


def test_missing_signals_differ_from_zeros() -> None:
    signals, labels = synthetic_signals()
    space = FeatureSpace.fit(signals)
    missing = Signals(ensemble_p_match=0.6)
    zero = Signals(ensemble_p_match=0.6, entailment_p_entail=0.0)
    vectors = space.transform([missing, zero])
    column = space.columns.index("entailment_p_entail")
    indicator = len(space.columns) + column
    assert vectors[0, column] == pytest.approx(space.means[column]) != 0.0
    assert (vectors[0, indicator], vectors[1, column], vectors[1, indicator]) == (1.0, 0.0, 0.0)
    assert math.isnan(space.raw([missing])[0, column])
    platt = PlattCalibrator().fit(signals, labels)
    confidence_missing, confidence_zero = platt.predict([missing, zero])
    assert confidence_missing != confidence_zero


def test_names_unknown_to_the_calibrator_are_refused() -> None:
    signals, labels = synthetic_signals()
    platt = PlattCalibrator().fit(signals, labels)
    with pytest.raises(InvalidArgumentError) as judge:
        platt.check(Signals(judge_p_yes={"gpt": 0.9}))
    assert judge.value.field == "signals.judge_p_yes[gpt]"
    with pytest.raises(InvalidArgumentError) as extra:
        platt.check(Signals(extra={"vibes": 1.0}))
    assert extra.value.field == "signals.extra[vibes]"
    isotonic = IsotonicCalibrator(score="judge_p_yes.a").fit(signals, labels)
    with pytest.raises(InvalidArgumentError, match="missing") as absent:
        isotonic.check(Signals(ensemble_p_match=0.9))
    assert absent.value.field == "signals.judge_p_yes[a]"


def test_one_class_cannot_be_calibrated() -> None:
    signals, _ = synthetic_signals(20)
    with pytest.raises(InvalidArgumentError, match="both correct"):
        PlattCalibrator().fit(signals, [1] * 20)
