"""The scorer the service runs: thresholds per alpha, decisions, refusals."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from tribunal.confidence import ConfidenceScorer, FitConfig, Signals, fit_artifact
from tribunal.confidence._artifact import CalibratorArtifact
from tribunal.confidence._threshold import Decision, RiskThreshold
from tribunal.core import ConfigError, InvalidArgumentError, load_settings

from tests.unit._confidence_data import synthetic_data, synthetic_signals


@pytest.fixture(scope="module")
def artifact() -> CalibratorArtifact:
    # 2,000 items: the risk control certifies α = 0.05 on the part it did not fit on.
    return fit_artifact(synthetic_data(2000), FitConfig(calibrator="platt", alphas=(0.05, 0.1)))


def test_scores_match_the_artifact_and_decide_by_the_alpha_threshold(
    artifact: CalibratorArtifact,
) -> None:
    scorer = ConfidenceScorer(artifact, alpha=0.05)
    probe, _ = synthetic_signals(50, seed=5)
    results = scorer.score_many(probe)
    confidences = artifact.predict(probe)
    threshold = artifact.threshold_for(0.05).threshold
    assert threshold is not None
    for result, confidence in zip(results, confidences, strict=True):
        assert result.confidence == confidence
        assert result.threshold == threshold
        assert result.alpha == 0.05
        assert result.calibrator_version == artifact.version
        assert result.decision is (
            Decision.ACCEPT if confidence >= threshold else Decision.FALLBACK
        )
    looser = scorer.score(probe[0], alpha=0.1)
    assert looser.threshold == artifact.threshold_for(0.1).threshold
    assert looser.alpha == 0.1


def test_an_alpha_without_a_threshold_is_refused(artifact: CalibratorArtifact) -> None:
    scorer = ConfidenceScorer(artifact, alpha=0.05)
    with pytest.raises(InvalidArgumentError, match="no threshold selected") as caught:
        scorer.score(Signals(ensemble_p_match=0.5), alpha=0.2)
    assert caught.value.field == "alpha"
    with pytest.raises(InvalidArgumentError) as batch:
        scorer.score_many([Signals(), Signals()], [None, 2.0])
    assert batch.value.field == "items[1].alpha"
    with pytest.raises(ConfigError):
        ConfidenceScorer(artifact, alpha=0.01)


def test_no_qualifying_threshold_never_accepts(
    artifact: CalibratorArtifact, caplog: pytest.LogCaptureFixture
) -> None:
    never = RiskThreshold(
        alpha=0.05, delta=0.1, threshold=None, accepted=0, errors=0, upper_bound=None, n=10
    )
    empty = CalibratorArtifact(
        calibrator=artifact.calibrator,
        thresholds=(never,),
        config=artifact.config,
        training_data=artifact.training_data,
    )
    with caplog.at_level("WARNING", logger="tribunal.confidence._scorer"):
        scorer = ConfidenceScorer(empty, alpha=0.05, escalate_band=0.5)
    assert "nothing will be accepted" in caplog.text
    best = Signals(ensemble_p_match=1.0, dense_score=1.0, judge_p_yes={"a": 1.0, "b": 1.0})
    result = scorer.score(best)
    assert result.confidence > 0.9
    assert result.decision is Decision.FALLBACK
    assert math.isinf(result.threshold)


def test_escalate_band_and_plain_threshold(artifact: CalibratorArtifact) -> None:
    probe, _ = synthetic_signals(200, seed=6)
    banded = ConfidenceScorer(artifact, alpha=0.05, escalate_band=0.2).score_many(probe)
    threshold = banded[0].threshold
    for result in banded:
        if threshold - 0.2 <= result.confidence < threshold:
            assert result.decision is Decision.ESCALATE
    assert any(r.decision is Decision.ESCALATE for r in banded)
    plain = ConfidenceScorer(artifact, alpha=0.05, plain_threshold=0.5)
    result = plain.score(probe[0])
    assert (result.threshold, result.alpha) == (0.5, 0.0)
    with pytest.raises(InvalidArgumentError, match="plain threshold"):
        plain.score(probe[0], alpha=0.05)


def test_from_settings_reads_the_configured_artifact(
    artifact: CalibratorArtifact, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = artifact.save(tmp_path / "c.json")
    monkeypatch.setenv("TRIBUNAL_CONFIDENCE__ARTIFACT_PATH", str(path))
    monkeypatch.setenv("TRIBUNAL_CONFIDENCE__ALPHA", "0.1")
    scorer = ConfidenceScorer.from_settings(load_settings())
    assert scorer.version == artifact.version
    assert scorer.score(Signals(ensemble_p_match=0.9)).alpha == 0.1


def test_confidence_settings_are_validated_with_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_CONFIDENCE__ALPHA", "1.5")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == "confidence.alpha"
    assert "TRIBUNAL_CONFIDENCE__ALPHA" in str(caught.value)
