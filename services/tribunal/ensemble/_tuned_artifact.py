"""The tuned matcher: a versioned directory bound to one KB collection.

Layout (``DATA_DIR/tuned/<collection>/<version>/``)::

    manifest.json        format, version, collection binding, base model, split, metrics
    model/               the fine-tuned sentence-transformers model
    match-features.json  the matching head (a ``tribunal.match-features/1`` regression
                         over the tuned model's cosines)

The version is ``tm-`` + 12 hex of a sha256 over every file's path and bytes and the
manifest without its version: two directories with one version match identically,
and a modified file is refused at load. ``DATA_DIR/tuned/<collection>/current`` names
the version the services load for that collection.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core import TUNED_MODEL_PREFIX, FailedPreconditionError

__all__ = [
    "TUNED_FORMAT",
    "TunedMatcher",
    "current_tuned_dir",
    "tuned_root",
]

TUNED_FORMAT = "tribunal.tuned-matcher/1"
_FIELD = "ensemble.tuned_matcher"


def tuned_root(data_dir: Path, collection: str) -> Path:
    """Where a collection's tuned matchers live."""
    return data_dir / "tuned" / collection


def current_tuned_dir(data_dir: Path, collection: str) -> Path | None:
    """The directory ``current`` names for ``collection``; None when none was tuned."""
    pointer = tuned_root(data_dir, collection) / "current"
    if not pointer.is_file():
        return None
    return tuned_root(data_dir, collection) / pointer.read_text(encoding="utf-8").strip()


def _digest(directory: Path, manifest: dict[str, Any]) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        relative = path.relative_to(directory).as_posix()
        if relative == "manifest.json":
            continue
        digest.update(relative.encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    content = {k: v for k, v in manifest.items() if k != "version"}
    digest.update(json.dumps(content, sort_keys=True).encode())
    return "tm-" + digest.hexdigest()[:12]


@dataclass(frozen=True)
class TunedMatcher:
    """A loaded, verified tuned-matcher directory."""

    directory: Path
    manifest: dict[str, Any]

    @property
    def version(self) -> str:
        return str(self.manifest["version"])

    @property
    def collection(self) -> str:
        return str(self.manifest["binding"]["collection"])

    @property
    def model_dir(self) -> Path:
        return self.directory / "model"

    @property
    def head_path(self) -> Path:
        return self.directory / "match-features.json"

    @property
    def split(self) -> dict[str, Any]:
        return dict(self.manifest["split"])

    @property
    def weights_unchanged(self) -> bool:
        """Whether the model is its base model as it was: no encoder fine-tune (``epochs``
        0), so its vectors are the base model's."""
        config = self.manifest.get("config") or {}
        return float(config.get("epochs", 1.0)) <= 0.0 and bool(self.base_name)

    @property
    def base_name(self) -> str:
        """The name the profile gives the base model (its vectors' store under
        ``data_dir/vectors``); empty when the manifest does not say."""
        return str((self.manifest.get("base") or {}).get("name") or "")

    @property
    def vectors_name(self) -> str:
        """Under which model name the KB entries' vectors of this model are stored: the
        base model's when the weights are unchanged (the vectors the KB stored at
        ingestion serve it as they are), else the tune's own, ``tuned:<version>``."""
        return self.base_name if self.weights_unchanged else TUNED_MODEL_PREFIX + self.version

    @classmethod
    def seal(cls, directory: Path, manifest: dict[str, Any]) -> TunedMatcher:
        """Write ``manifest.json`` with the version of the directory's contents; returns it."""
        manifest = {**manifest, "format": TUNED_FORMAT}
        manifest["version"] = _digest(directory, manifest)
        text = json.dumps(manifest, indent=2, sort_keys=True) + "\n"
        (directory / "manifest.json").write_text(text, encoding="utf-8")
        return cls(directory, manifest)

    @classmethod
    def load(cls, directory: Path) -> TunedMatcher:
        """Read and verify a tuned-matcher directory.

        Raises:
            FailedPreconditionError: not there, not one, or its contents do not match its
                version (modified or damaged); the message says what to do.
        """
        path = directory / "manifest.json"
        if not path.is_file():
            raise FailedPreconditionError(
                f"no tuned matcher at {directory} (no manifest.json): run `tribunal tune "
                "--collection C --traffic LABELLED.jsonl`",
                field=_FIELD,
            )
        try:
            manifest = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise FailedPreconditionError(
                f"{path}: not readable JSON: {exc}", field=_FIELD
            ) from None
        if not isinstance(manifest, dict) or manifest.get("format") != TUNED_FORMAT:
            raise FailedPreconditionError(f"{path} is not a {TUNED_FORMAT} manifest", field=_FIELD)
        recomputed = _digest(directory, manifest)
        if manifest.get("version") != recomputed:
            raise FailedPreconditionError(
                f"{directory}: contents do not match version {manifest.get('version')!r} "
                f"(recomputed {recomputed}); the tuned matcher was modified or damaged",
                field=_FIELD,
            )
        return cls(directory, manifest)
