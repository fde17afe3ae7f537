"""Model artifacts: the offline catalog and the local model cache."""

from ._catalog import CATALOG, ModelArtifact, get_artifact
from ._store import ModelStore

__all__ = [
    "CATALOG",
    "ModelArtifact",
    "ModelStore",
    "get_artifact",
]
