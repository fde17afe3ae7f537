"""Loading the profile's models from the cache (offline: never the hub for artifacts)."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from ._errors import ConfigError
from .models import ModelStore, get_artifact
from .settings import Settings

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

__all__ = [
    "MODEL_LOAD_LOCK",
    "TUNED_MODEL_PREFIX",
    "embedder_version",
    "load_embedder",
    "model_path",
    "resolve_device",
]

TUNED_MODEL_PREFIX = "tuned:"
"""A retrieval model that is a collection's tuned matcher model is named this, then the
tune's version (``tuned:tm-…``); a profile's embedder is named by
:func:`embedder_version`."""

MODEL_LOAD_LOCK = threading.RLock()
"""Held around every transformers / sentence-transformers load in this process.

transformers builds a model under process-wide patches (empty weights on the meta
device, then filled from the checkpoint); two loads in different threads (the
in-process stage host starts every service's loader at once) can leave a tied or
missing parameter on the meta device — seen as "Cannot copy out of meta tensor" when
the SmolLM2 judge loaded beside the embedder. Loads take seconds; serialising them
costs nothing that matters.
"""


def resolve_device(settings: Settings) -> str:
    """``cuda`` when asked for or (``auto``) when a GPU is visible, else ``cpu``."""
    if settings.device != "auto":
        return settings.device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def embedder_version(settings: Settings) -> str:
    """The profile's retrieval embedder as ``<artifact id>@<12 hex of its pinned sha256>``
    (or its hub id): how searches report it and calibrations record it."""
    assert settings.roles is not None, "the profile defines no roles"
    spec = settings.model_spec(settings.roles.embedder)
    if spec.artifact is not None:
        return f"{spec.artifact}@{get_artifact(spec.artifact).sha256[:12]}"
    return str(spec.hf_id)


def model_path(settings: Settings, key: str) -> Path:
    """Local path of model ``key`` of the profile; raises if it is not installed.

    Raises:
        ConfigError: the model is not an offline artifact (it has an ``hf_id``).
        ModelNotInstalledError: the artifact is not in ``settings.model_dir``.
    """
    spec = settings.model_spec(key)
    if spec.artifact is None:
        raise ConfigError(
            f"model {key!r} of profile {settings.profile!r} is a hub model ({spec.hf_id}), "
            "not an offline artifact",
            field=f"models.{key}",
        )
    return ModelStore(settings.model_dir, progress=False).require(get_artifact(spec.artifact))


def load_embedder(settings: Settings, key: str | None = None) -> SentenceTransformer:
    """Embedder model ``key`` of the profile (default: ``roles.embedder``) as a
    sentence-transformers model on the chosen device."""
    from sentence_transformers import SentenceTransformer

    if key is None:
        assert settings.roles is not None, "the profile defines no roles"
        key = settings.roles.embedder
    spec = settings.model_spec(key)
    device = resolve_device(settings)
    if spec.artifact is not None:
        # A local folder: keep libraries from reaching for the hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        with MODEL_LOAD_LOCK:
            return SentenceTransformer(str(model_path(settings, key)), device=device)
    with MODEL_LOAD_LOCK:
        return SentenceTransformer(str(spec.hf_id), device=device)
