"""Settings: profile YAML + TRIBUNAL_* overrides, validated, errors name the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from tribunal.core import ConfigError, available_profiles, load_settings
from tribunal.core.settings import settings_reference
from tribunal.core.settings._profiles import RENAMED_SETTINGS
from tribunal.core.settings._reference import setting_rows


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


# -- one naming scheme, internal wiring out of the settings --------------------------------


@pytest.mark.parametrize(
    "setting",
    [
        "retrieval.max_searches_per_request",
        "retrieval.max_entries_per_request",
        "retrieval.chunk_size_chars",
        "entailment.max_pairs_per_request",
        "entailment.chunk_size_chars",
        "debate.max_items_per_request",
        "debate.max_answers_per_item",
        "ensemble.max_items_per_request",
        "ensemble.truncate_chunk_chars",
        "confidence.max_items_per_request",
        "gateway.max_items_per_request",
    ],
)
def test_limits_are_read_from_their_variables(
    monkeypatch: pytest.MonkeyPatch, setting: str
) -> None:
    section, name = setting.split(".")
    monkeypatch.setenv(f"TRIBUNAL_{section.upper()}__{name.upper()}", "77")
    assert getattr(getattr(load_settings(), section), name) == 77


# Limits that are not a count of things in one request (server, model, scaling, debate).
NOT_PER_REQUEST = {
    "max_workers",
    "max_message_bytes",
    "max_signed_record_bytes",
    "max_prompt_tokens",
    "max_new_tokens",
    "max_rounds",
    "max_top_k",
    "max_replicas",
    "max_batch_size",
    "max_ongoing_requests",
    "max_queued_requests",
    "max_surge_percent",
}


def test_every_count_limit_follows_the_scheme() -> None:
    names = {row.name.split(".")[-1] for row in setting_rows()}
    counts = {n for n in names if n.startswith("max_") and not n.endswith("_chars")}
    assert {
        n for n in counts - NOT_PER_REQUEST if not n.endswith(("_per_request", "_per_item"))
    } == set()
    # Text sizes: max_<field>_chars for a request limit, never <field>_max_chars.
    assert {n for n in names if n.endswith("_max_chars") or n.startswith("batch_max_")} == set()


def test_a_renamed_setting_says_its_new_name(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = load_settings()
    for old, new in RENAMED_SETTINGS.items():
        section, name = new.split(".")
        fields = type(getattr(settings, section)).model_fields
        assert name in fields, new
        assert old.split(".")[1] not in fields, old
    monkeypatch.setenv("TRIBUNAL_GATEWAY__BATCH_MAX_ITEMS", "8")
    with pytest.raises(ConfigError, match=r"now gateway\.max_items_per_request") as caught:
        load_settings()
    assert "TRIBUNAL_GATEWAY__MAX_ITEMS_PER_REQUEST" in str(caught.value)


def test_hosting_options_are_not_settings(tmp_path: Path) -> None:
    """Whether the ensemble serves Match, and when it loads its relevance judge, are chosen
    by the code that starts it (label jobs), not configured."""
    profile = tmp_path / "p.yaml"
    profile.write_text("ensemble:\n  serve_match: false\n")
    with pytest.raises(ConfigError, match="no such setting") as caught:
        load_settings(str(profile))
    assert caught.value.field == "ensemble.serve_match"


# -- the reference ---------------------------------------------------------------------------


def test_every_setting_has_a_description_and_a_variable() -> None:
    rows = setting_rows()
    assert len(rows) > 150
    assert [r.name for r in rows if len(r.description) < 10] == []
    names = [r.name for r in rows]
    assert len(names) == len(set(names))
    for row in rows:
        if "<key>" not in row.name:
            assert row.env == "TRIBUNAL_" + row.name.upper().replace(".", "__")


def test_every_listed_setting_exists() -> None:
    settings = load_settings("tiny")
    for row in setting_rows():
        if "<key>" in row.name:
            continue
        value: object = settings
        for part in row.name.split("."):
            assert part in type(value).model_fields, row.name  # type: ignore[attr-defined]
            value = getattr(value, part)


def test_the_committed_reference_is_what_the_command_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from tribunal.cli import main

    assert main(["config", "docs"]) == 0
    printed = capsys.readouterr().out
    assert printed == settings_reference()
    committed = (Path(__file__).parents[2] / "docs" / "settings.md").read_text(encoding="utf-8")
    assert committed == printed, (
        "docs/settings.md is stale: run `tribunal config docs > docs/settings.md`"
    )
