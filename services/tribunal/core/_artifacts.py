"""Where a service finds its trained artifact: configured, trained here, or shipped.

Order: the path the settings name; else the one ``tribunal … train|fit`` writes
under ``data_dir``; else the artifact shipped with the package for the profile
(``tribunal/artifacts/<profile>/<name>``), trained on the shared data sets with
the profile's models, so a fresh install answers without a training run.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from .settings import Settings

__all__ = ["resolve_artifact", "shipped_artifact"]


def shipped_artifact(profile: str, name: str) -> Path | None:
    """The package's artifact ``name`` for ``profile``, if it ships one."""
    path = Path(str(resources.files("tribunal") / "artifacts" / profile / name))
    return path if path.exists() else None


def resolve_artifact(
    settings: Settings, configured: Path | None, name: str, *, shipped: str | None = None
) -> Path:
    """The artifact path to load (it may not exist: the loader then says how to make it).

    ``shipped``: the shipped artifact's name when it differs from the trained one's
    (``name``), e.g. one calibrator per matcher.
    """
    if configured is not None:
        return configured.expanduser()
    trained = settings.data_dir / name
    if trained.exists():
        return trained
    return shipped_artifact(settings.profile, shipped or name) or trained
