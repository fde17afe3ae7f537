"""Settings: profile YAML + TRIBUNAL_* overrides, validated, errors name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from tribunal.core import ConfigError, available_profiles, load_settings


def test_tiny_is_the_default_profile_and_names_every_role() -> None:
    settings = load_settings()
    assert settings.profile == "tiny"
    assert settings.roles is not None
    assert settings.roles.judges == ["llm_strong", "llm_weak", "llm_tiny"]
    assert settings.models["embedder"].artifact == "all-minilm-l6-v2"
    assert settings.database_url == f"sqlite:///{settings.data_dir / 'tribunal.db'}"


def test_shipped_profiles_all_validate() -> None:
    assert set(available_profiles()) >= {"tiny", "standard"}
    for name in available_profiles():
        assert load_settings(name).profile == name


def test_environment_overrides_profile_and_keywords_override_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("TRIBUNAL_SERVER__PORT", "50123")
    monkeypatch.setenv("TRIBUNAL_DATABASE_URL", "postgresql+psycopg://127.0.0.1/test")
    assert load_settings().server.port == 50123
    assert load_settings().database_url == "postgresql+psycopg://127.0.0.1/test"
    assert load_settings(server={"port": 50999}).server.port == 50999


def test_bad_port_names_the_field_and_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_SERVER__PORT", "99999")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == "server.port"
    assert "TRIBUNAL_SERVER__PORT" in str(caught.value)
    assert "65535" in str(caught.value)


def test_non_numeric_value_names_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_SERVER__MAX_WORKERS", "many")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    assert caught.value.field == "server.max_workers"
    assert "'many'" in str(caught.value)


def test_unknown_device_lists_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_DEVICE", "tpu")
    with pytest.raises(ConfigError, match="'auto', 'cpu' or 'cuda'") as caught:
        load_settings()
    assert caught.value.field == "device"


def test_role_pointing_at_a_missing_model_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRIBUNAL_ROLES__JUDGES", '["llm_strong", "gpt5"]')
    with pytest.raises(ConfigError, match="'gpt5'") as caught:
        load_settings()
    assert caught.value.field == "roles.judges[1]"


def test_unknown_profile_lists_available() -> None:
    with pytest.raises(ConfigError, match="tiny") as caught:
        load_settings("huge")
    assert caught.value.field == "profile"


def test_profile_from_a_path_with_a_typo_is_refused(tmp_path: Path) -> None:
    profile = tmp_path / "mine.yaml"
    profile.write_text("profile: mine\nsevrer:\n  port: 1\n")
    with pytest.raises(ConfigError) as caught:
        load_settings(str(profile))
    assert caught.value.field == "sevrer"


def test_model_needs_exactly_one_source(tmp_path: Path) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text("models:\n  e:\n    kind: embedder\n")
    with pytest.raises(ConfigError, match="exactly one of 'artifact' or 'hf_id'"):
        load_settings(str(profile))
    profile.write_text("models:\n  e:\n    kind: embedder\n    artifact: no-such-model\n")
    with pytest.raises(ConfigError, match="unknown artifact 'no-such-model'"):
        load_settings(str(profile))


def test_invalid_yaml_is_a_config_error(tmp_path: Path) -> None:
    profile = tmp_path / "broken.yaml"
    profile.write_text("models: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_settings(str(profile))


def test_settings_are_immutable() -> None:
    settings = load_settings()
    with pytest.raises(Exception, match="frozen"):
        settings.profile = "standard"  # type: ignore[misc]


def test_label_band_overrides_default_to_the_artifact_and_must_be_ordered() -> None:
    gateway = load_settings("tiny").gateway
    assert (gateway.label_irrelevant_at, gateway.label_relevant_at) == (None, None)
    one_end = load_settings("tiny", gateway={"label_relevant_at": 0.9}).gateway
    assert (one_end.label_irrelevant_at, one_end.label_relevant_at) == (None, 0.9)
    with pytest.raises(ConfigError, match=r"label_irrelevant_at must be <= gateway\.label_rel"):
        load_settings("tiny", gateway={"label_irrelevant_at": 0.8, "label_relevant_at": 0.2})
