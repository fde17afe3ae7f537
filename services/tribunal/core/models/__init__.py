"""Model artifacts: the offline catalog and the local model cache."""

from ._catalog import CATALOG, ArtifactKind, ModelArtifact, WheelPart, get_artifact
from ._store import InstallReport, ModelStatus, ModelStore

__all__ = [
    "CATALOG",
    "ArtifactKind",
    "InstallReport",
    "ModelArtifact",
    "ModelStatus",
    "ModelStore",
    "WheelPart",
    "get_artifact",
]
