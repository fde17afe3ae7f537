"""The relevance artifact (``tribunal.relevance/1``): validation, the formula, where it is found.

No model runs here: the artifact is data (tests/integration/test_relevance_judge.py runs
it on the tiny profile's models).
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from tribunal.core import ConfigError, FailedPreconditionError, load_settings
from tribunal.ensemble import RelevanceArtifact, relevance_artifact_path
from tribunal.ensemble._relevance import RELEVANCE_FORMAT, RelevanceFeature

VALID: dict[str, Any] = {
    "format": RELEVANCE_FORMAT,
    "version": "rel-unit-1",
    "features": [
        {
            "name": "llm_strong/yesno",
            "kind": "llm_p_yes",
            "model_key": "llm_strong",
            "prompt_id": "relevance/yesno@1",
        },
        {"name": "embedder/cosine", "kind": "cosine", "model_key": "embedder"},
    ],
    "coef": [1.2, 3.4],
    "intercept": -1.0,
    "threshold": 0.45,
    "band": {"low": 0.30, "high": 0.60},
    "backend": "transformers",
    "fitted_on": {"data": "trec-dl-2019", "n": 300, "date": "2026-11-30"},
    "metrics": {"auroc": 0.8},
}


def _with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    for key, value in changes.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = value
    return data


def _feature(index: int, **changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    data["features"][index].update(changes)
    data["features"][index] = {k: v for k, v in data["features"][index].items() if v is not None}
    return data


def test_a_valid_artifact_round_trips_through_json(tmp_path: Path) -> None:
    artifact = RelevanceArtifact.from_dict(VALID)
    assert artifact.features[0] == RelevanceFeature(
        "llm_strong/yesno", "llm_p_yes", "llm_strong", "relevance/yesno@1"
    )
    assert (artifact.band_low, artifact.threshold, artifact.band_high) == (0.30, 0.45, 0.60)
    path = tmp_path / "relevance.json"
    artifact.save(path)
    assert json.loads(path.read_text()) == VALID
    assert RelevanceArtifact.load(path) == artifact
    artifact.check_profile(load_settings("tiny"))


def test_p_relevant_is_the_logistic_formula_over_logit_p_yes_and_the_raw_cosine() -> None:
    artifact = RelevanceArtifact.from_dict(VALID)
    p_yes, cosine = 0.7, 0.25
    z = -1.0 + 1.2 * math.log(0.7 / 0.3) + 3.4 * 0.25
    assert artifact.p_relevant([p_yes, cosine]) == pytest.approx(1 / (1 + math.exp(-z)), abs=1e-12)
    # P(yes) is clipped to [1e-6, 1 - 1e-6] before the logit: 0 and 1 stay finite.
    low = artifact.p_relevant([0.0, 0.0])
    assert low == pytest.approx(1 / (1 + math.exp(1.0 - 1.2 * math.log(1e-6 / (1 - 1e-6)))))
    assert 0.0 < low < 1.0
    # A large |z| neither overflows nor leaves (0, 1]: the sigmoid is evaluated stably.
    huge = RelevanceArtifact.from_dict(_with(intercept=-5000.0))
    assert huge.p_relevant([0.5, 0.0]) == 0.0
    assert RelevanceArtifact.from_dict(_with(intercept=5000.0)).p_relevant([0.5, 0.0]) == 1.0


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (_with(format="tribunal.relevance/2"), "this build reads 'tribunal.relevance/1'"),
        (_with(version=""), "version must be a non-empty string"),
        (_with(coef=[1.0]), "coef has 1 values for 2 features"),
        (_with(coef=[1.0, float("nan")]), "coef[1] must be a finite number"),
        (_with(intercept="1"), "intercept must be a finite number"),
        (_with(features=[]), "features must be a non-empty list"),
        (_with(threshold=1.7), "need 0 <= threshold <= 1"),
        (_with(band={"low": 0.5, "high": 0.4}), "need 0 <= band.low <= band.high <= 1"),
        (_with(band={"low": -0.1, "high": 0.6}), "need 0 <= band.low"),
        (_with(band={"low": 0.3}), 'band must be {"low": ..., "high": ...}'),
        (_with(backend="vllm"), "backend is 'vllm'; known: transformers, llamacpp, openai"),
        (_with(thresold=0.5), "unknown keys ['thresold']"),
        (_feature(1, name="llm_strong/yesno"), "repeated: ['llm_strong/yesno']"),
        (_feature(1, kind="bm25"), "features[1].kind is 'bm25'; known kinds: llm_p_yes, cosine"),
        (_feature(0, prompt_id=None), "features[0] (llm_p_yes) needs a prompt_id"),
        (_feature(0, prompt_id="relevance/nosuch@1"), "features[0].prompt_id: no prompt"),
        (_feature(0, prompt_id="relevance/yesno"), "must name a version: 'relevance/yesno@1'"),
        (_feature(0, prompt_id="matching/ral2m@1"), "needs fields ['answer', 'question']"),
        (_feature(1, prompt_id="relevance/yesno@1"), "cosine feature: remove its prompt_id"),
        (_feature(1, model="embedder"), "features[1] has unknown keys ['model']"),
    ],
)
def test_bad_artifacts_are_config_errors_saying_what_to_fix(
    data: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        RelevanceArtifact.from_dict(data, source="bad.json")
    assert message in str(caught.value)
    assert str(caught.value).startswith("relevance artifact bad.json: ")
    assert caught.value.field == "ensemble.relevance_artifact"


def test_an_empty_band_is_allowed_and_construction_in_code_is_validated() -> None:
    empty = RelevanceArtifact.from_dict(_with(band={"low": 0.45, "high": 0.45}))
    assert empty.band_low == empty.band_high == empty.threshold
    good = RelevanceArtifact.from_dict(VALID)
    with pytest.raises(ConfigError, match="coef has 1 values for 2 features"):
        RelevanceArtifact(
            version="x",
            features=good.features,
            coef=(1.0,),
            intercept=0.0,
            threshold=0.5,
            band_low=0.4,
            band_high=0.6,
        )


def test_features_must_name_models_of_the_profile_of_the_right_kind() -> None:
    settings = load_settings("tiny")
    unknown = RelevanceArtifact.from_dict(_feature(0, model_key="llm_huge"))
    with pytest.raises(ConfigError, match="'llm_huge' is not a model of profile 'tiny'"):
        unknown.check_profile(settings)
    wrong_kind = RelevanceArtifact.from_dict(_feature(1, model_key="llm_tiny"))
    with pytest.raises(ConfigError, match="needs an embedder model; 'llm_tiny' is a llm"):
        wrong_kind.check_profile(settings)


def test_unreadable_and_missing_files(tmp_path: Path) -> None:
    with pytest.raises(FailedPreconditionError) as missing:
        RelevanceArtifact.load(tmp_path / "none.json")
    assert f"no relevance artifact at {tmp_path / 'none.json'}: create it" in str(missing.value)
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ConfigError, match="not readable JSON"):
        RelevanceArtifact.load(broken)


def test_the_artifact_is_found_configured_then_in_data_dir_then_shipped(tmp_path: Path) -> None:
    configured = tmp_path / "mine.json"
    settings = load_settings("tiny", ensemble={"relevance_artifact": str(configured)})
    assert relevance_artifact_path(settings) == configured
    settings = load_settings("tiny", data_dir=str(tmp_path / "data"))
    trained = tmp_path / "data" / "ensemble" / "relevance.json"
    shipped = Path(__file__).resolve().parents[2] / (
        "services/tribunal/artifacts/tiny/relevance/artifact.json"
    )
    # Before one is trained here: the shipped one if the package has it, else the path
    # to create (errors name it).
    assert relevance_artifact_path(settings) == (shipped if shipped.is_file() else trained)
    RelevanceArtifact.from_dict(VALID).save(trained)
    assert relevance_artifact_path(settings) == trained
