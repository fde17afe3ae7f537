"""The versioned artifact ``tribunal ensemble train`` writes and the service loads.

A folder with ``manifest.json`` (version, judges and their vote thresholds, the
embedder, each aggregator's hyperparameters and fitted scalars, the data hash, split
sizes and metrics) and ``arrays.npz`` (fitted weights, no pickles). The version is a
hash of both, so two artifacts with the same version predict the same.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ..core import FailedPreconditionError, NotFoundError
from ..core.settings import AGGREGATOR_NAMES
from ._base import Aggregator, EnsembleInputs
from ._latent import LatentEnsemble
from ._majority import MajorityVote
from ._neural import NeuralGating
from ._weighted import WeightedVote

__all__ = ["AGGREGATORS", "EnsembleArtifact"]

AGGREGATORS: dict[str, type[Aggregator]] = {
    cls.name: cls for cls in (MajorityVote, WeightedVote, NeuralGating, LatentEnsemble)
}
"""Aggregator classes by name."""
assert tuple(AGGREGATORS) == AGGREGATOR_NAMES

_FORMAT = 1


@dataclass
class EnsembleArtifact:
    """Fitted aggregators over a fixed panel of judges."""

    judges: tuple[str, ...]
    """Judge names (``model_key/prompt_name``), the column order of every input."""
    vote_thresholds: NDArray[np.float64]
    """Per judge: P(yes) at or above which it votes yes."""
    aggregators: dict[str, Aggregator]
    default_aggregator: str
    embedder: str
    """Embedder of the query vectors (the service must use the same)."""
    dimension: int
    data: dict[str, Any] = field(default_factory=dict)
    """Dataset path, hash, split seed and sizes."""
    metrics: dict[str, Any] = field(default_factory=dict)
    """Validation and test metrics per aggregator and judge."""
    version: str = ""
    """Set by :meth:`save` / :meth:`load`: a hash of the contents."""

    def inputs(self, p_yes: NDArray[Any], embeddings: NDArray[Any]) -> EnsembleInputs:
        """The aggregators' inputs: votes at this artifact's thresholds."""
        return EnsembleInputs.from_p_yes(p_yes, embeddings, self.vote_thresholds)

    def aggregator(self, name: str | None = None) -> Aggregator:
        chosen = name or self.default_aggregator
        if chosen not in self.aggregators:
            raise FailedPreconditionError(
                f"the artifact has no {chosen!r} aggregator; it has {sorted(self.aggregators)}",
                field="ensemble.aggregator",
            )
        return self.aggregators[chosen]

    def _contents(self) -> tuple[dict[str, Any], dict[str, NDArray[Any]]]:
        manifest: dict[str, Any] = {
            "format": _FORMAT,
            "judges": list(self.judges),
            "vote_thresholds": [float(t) for t in self.vote_thresholds],
            "default_aggregator": self.default_aggregator,
            "embedder": self.embedder,
            "dimension": self.dimension,
            "aggregators": {},
            "data": self.data,
            "metrics": self.metrics,
        }
        arrays: dict[str, NDArray[Any]] = {}
        for name, aggregator in self.aggregators.items():
            manifest["aggregators"][name] = {
                "config": aggregator.get_config(),
                "info": aggregator.get_info(),
            }
            for key, value in aggregator.get_state().items():
                arrays[f"{name}/{key}"] = np.asarray(value)
        return manifest, arrays

    @staticmethod
    def _version(manifest: Mapping[str, Any], arrays: Mapping[str, NDArray[Any]]) -> str:
        digest = hashlib.sha256(json.dumps(manifest, sort_keys=True).encode())
        for key in sorted(arrays):
            digest.update(key.encode())
            digest.update(np.ascontiguousarray(arrays[key]).tobytes())
        return "ens-" + digest.hexdigest()[:12]

    def save(self, folder: Path) -> str:
        """Write the artifact into ``folder`` (created); returns its version."""
        manifest, arrays = self._contents()
        self.version = self._version(manifest, arrays)
        folder.mkdir(parents=True, exist_ok=True)
        buffer = io.BytesIO()
        np.savez(buffer, **arrays)  # type: ignore[arg-type]
        (folder / "arrays.npz").write_bytes(buffer.getvalue())
        text = json.dumps({"version": self.version, **manifest}, indent=2) + "\n"
        (folder / "manifest.json").write_text(text, encoding="utf-8")
        return self.version

    @classmethod
    def load(cls, folder: Path) -> EnsembleArtifact:
        """Read an artifact folder.

        Raises:
            NotFoundError: no artifact there.
            FailedPreconditionError: an unknown format or aggregator, or a damaged file.
        """
        path = folder / "manifest.json"
        if not path.is_file():
            raise NotFoundError(
                f"no ensemble artifact at {folder}; train one with `tribunal ensemble train`",
                field="ensemble.artifact_path",
            )
        manifest = json.loads(path.read_text(encoding="utf-8"))
        if manifest.get("format") != _FORMAT:
            raise FailedPreconditionError(
                f"{path}: artifact format {manifest.get('format')!r}, this build reads {_FORMAT}",
                field="ensemble.artifact_path",
            )
        with np.load(folder / "arrays.npz", allow_pickle=False) as loaded:
            arrays = {key: loaded[key] for key in loaded.files}
        aggregators: dict[str, Aggregator] = {}
        for name, saved in manifest["aggregators"].items():
            if name not in AGGREGATORS:
                raise FailedPreconditionError(
                    f"{path}: unknown aggregator {name!r}", field="ensemble.artifact_path"
                )
            prefix = f"{name}/"
            state = {k[len(prefix) :]: v for k, v in arrays.items() if k.startswith(prefix)}
            aggregators[name] = AGGREGATORS[name].from_saved(saved["config"], saved["info"], state)
        version = manifest.pop("version")
        artifact = cls(
            judges=tuple(manifest["judges"]),
            vote_thresholds=np.asarray(manifest["vote_thresholds"], dtype=np.float64),
            aggregators=aggregators,
            default_aggregator=manifest["default_aggregator"],
            embedder=manifest["embedder"],
            dimension=int(manifest["dimension"]),
            data=manifest.get("data", {}),
            metrics=manifest.get("metrics", {}),
        )
        recomputed = cls._version(*artifact._contents())
        if recomputed != version:
            raise FailedPreconditionError(
                f"{path}: contents do not match version {version} (recomputed {recomputed}); "
                "the artifact was modified or damaged",
                field="ensemble.artifact_path",
            )
        artifact.version = version
        return artifact
