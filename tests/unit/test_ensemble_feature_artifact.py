"""The feature matcher's artifact: exact P(match), validation that names the field to fix,
a version that seals the contents, and where the service looks for it."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tribunal.core import ConfigError, FailedPreconditionError, load_settings
from tribunal.core._artifacts import shipped_artifact
from tribunal.ensemble import MATCH_FEATURES, FeatureEmbedder, MatchFeaturesArtifact, features_path
from tribunal.ensemble._feature_matcher import load_matcher


def _artifact(**changes: Any) -> MatchFeaturesArtifact:
    fields: dict[str, Any] = {
        "embedder": FeatureEmbedder(model_key="embedder", name="all-minilm-l6-v2"),
        "features": ("cos_question", "token_set"),
        "mean": (0.5, 0.25),
        "std": (0.25, 0.5),
        "coef": (2.0, -1.0),
        "intercept": 0.5,
        "threshold": 0.6,
    }
    fields.update(changes)
    return MatchFeaturesArtifact(**fields)


def test_p_match_is_the_standardised_logistic_regression() -> None:
    artifact = _artifact()
    values = {
        "cos_question": np.array([0.5, 1.0, -1.0]),
        "token_set": np.array([0.25, 0.0, 1.0]),
        "cos_answer": np.array([9.0, 9.0, 9.0]),  # not a feature of this artifact: ignored
    }
    # z = 0.5 + 2 (c - 0.5) / 0.25 - (t - 0.25) / 0.5
    z = [0.5, 0.5 + 4.0 + 0.5, 0.5 - 12.0 - 1.5]
    expected = [1 / (1 + math.exp(-v)) for v in z]
    assert artifact.p_match(values) == pytest.approx(expected, rel=1e-12)
    assert _artifact(intercept=-1e4).p_match(values).tolist() == [0.0, 0.0, 0.0]


def test_save_seals_a_version_and_load_refuses_edited_contents(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    saved = _artifact().save(path)
    assert saved.version.startswith("mf-")
    assert len(saved.version) == 15
    loaded = MatchFeaturesArtifact.load(path)
    assert loaded == saved
    assert _artifact(coef=(2.0, -1.5)).sealed().version != saved.version

    data = json.loads(path.read_text())
    data["coef"][0] = 3.0
    path.write_text(json.dumps(data))
    with pytest.raises(FailedPreconditionError, match="modified or damaged") as caught:
        MatchFeaturesArtifact.load(path)
    assert caught.value.field == "ensemble.features_artifact"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"features": ["cos_question", "bm25"]}, "unknown features ['bm25']"),
        ({"coef": [1.0]}, "coef has 1 values for 2 features"),
        ({"std": [0.0, 1.0]}, "std must be > 0"),
        ({"threshold": 1.5}, "threshold: Input should be less than or equal to 1"),
        ({"format": "tribunal.relevance/1"}, "format: Input should be 'tribunal.match-features/1'"),
        ({"extra": 1}, "extra: Extra inputs are not permitted"),
        ({"mean": [0.5, None]}, "mean.1: Input should be a valid number"),
    ],
)
def test_a_bad_file_names_what_to_fix(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    data = _artifact().sealed().model_dump(mode="json")
    data.update(change)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=re.escape(message)) as caught:
        MatchFeaturesArtifact.load(path)
    assert caught.value.field == "ensemble.features_artifact"


def test_missing_or_unreadable_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(FailedPreconditionError, match="tribunal-lab eval matching-features"):
        MatchFeaturesArtifact.load(tmp_path / "absent.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not readable JSON"):
        MatchFeaturesArtifact.load(tmp_path / "bad.json")


def test_the_tiny_profile_ships_a_matcher_on_the_mpnet_embedder(tmp_path: Path) -> None:
    settings = load_settings("tiny", data_dir=str(tmp_path))
    path = features_path(settings)
    assert path == shipped_artifact("tiny", "ensemble/match-features.json")
    artifact = MatchFeaturesArtifact.load(path)
    assert artifact.features == MATCH_FEATURES
    assert artifact.embedder.model_key == "embedder_large"
    assert settings.models[artifact.embedder.model_key].kind == "embedder"
    assert artifact.metrics["test"]["items"] > 300  # fitted and reported on the full set


def test_an_artifact_naming_a_model_the_profile_lacks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.json"
    _artifact(embedder=FeatureEmbedder(model_key="llm_weak", name="x")).save(path)
    settings = load_settings(
        "tiny",
        data_dir=str(tmp_path),
        ensemble={"matcher": "features", "features_artifact": str(path)},
    )
    with pytest.raises(ConfigError, match=r"needs embedder model 'llm_weak'.*embedder_large"):
        load_matcher(settings)


def test_the_shipped_calibrator_follows_the_matcher_unless_data_dir_has_one(
    tmp_path: Path,
) -> None:
    from tribunal.confidence import CalibratorArtifact, default_artifact_path

    features = load_settings("tiny", data_dir=str(tmp_path))
    judges = load_settings("tiny", data_dir=str(tmp_path), ensemble={"matcher": "judges"})
    assert features.ensemble.matcher == "features"  # the tiny profile's default
    assert default_artifact_path(features).name == "features-calibrator.json"
    assert default_artifact_path(judges).name == "judges-calibrator.json"
    # Each reads its own matcher's signals: the judges' one knows the six judges.
    assert not CalibratorArtifact.load(default_artifact_path(features)).calibrator.space_.judges
    assert len(CalibratorArtifact.load(default_artifact_path(judges)).calibrator.space_.judges) == 6
    trained = tmp_path / "confidence" / "calibrator.json"
    trained.parent.mkdir()
    trained.write_text("{}")
    assert default_artifact_path(features) == default_artifact_path(judges) == trained
