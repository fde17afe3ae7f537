"""Building the engine for a profile's model key and backend."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Literal

from .._errors import ConfigError
from .._loading import model_path, resolve_device
from ..models import get_artifact
from ..settings import Settings
from ._engine import LLMEngine

__all__ = [
    "Backend",
    "converted_source",
    "create_engine",
    "release_shared_engines",
    "shared_engine",
]

Backend = Literal["transformers", "llamacpp", "openai"]

_shared: dict[tuple[str, ...], LLMEngine[Any]] = {}
_shared_lock = threading.Lock()


def create_engine(
    settings: Settings, key: str, *, backend: Backend | None = None
) -> LLMEngine[Any]:
    """A new engine for model ``key`` of the profile on ``backend`` (default ``llm_backend``).

    Raises:
        ConfigError: the model is not an LLM, or the backend cannot run its source
            (llama.cpp needs a GGUF artifact).
        ModelNotInstalledError: the artifact is not in the model cache.
        FailedPreconditionError: the backend's library is not installed.
    """
    chosen = backend or settings.llm_backend
    spec = settings.model_spec(key)
    if spec.kind != "llm":
        raise ConfigError(f"model {key!r} is a {spec.kind}, not an LLM", field=f"models.{key}")
    name = spec.artifact or str(spec.hf_id)
    # n_threads None keeps the libraries' defaults (llama.cpp: half the cores). On a
    # shared machine more threads than free cores stall llama.cpp's OpenMP barriers
    # (measured here: 4x slower decoding with 2 threads than 1 while another job ran).
    llm = settings.llm
    if chosen == "openai":
        from ._openai import OpenAIEngine

        return OpenAIEngine(model_key=key, model_name=llm.openai_model or name, settings=llm)
    if chosen == "llamacpp":
        if spec.artifact is None or get_artifact(spec.artifact).kind != "gguf":
            raise ConfigError(
                f"the llamacpp backend needs a GGUF artifact; model {key!r} is {name}",
                field=f"models.{key}",
            )
        from ._llamacpp import LlamaCppEngine

        return LlamaCppEngine(
            model_key=key, model_name=name, gguf_path=model_path(settings, key), settings=llm
        )
    from ._transformers import TransformersEngine

    source: Any = spec.hf_id if spec.artifact is None else converted_source(settings, key)
    return TransformersEngine(
        model_key=key,
        model_name=name,
        source=source,
        device=resolve_device(settings),
        settings=llm,
    )


def converted_source(settings: Settings, key: str) -> Path:
    """The transformers folder of GGUF model ``key``, dequantised on first call (minutes,
    several GB of memory at its peak; later calls return at once).

    Raises:
        ModelNotInstalledError: the artifact is not in the model cache.
    """
    spec = settings.model_spec(key)
    assert spec.artifact is not None, "a hub model needs no conversion"
    from ._transformers import convert_gguf

    root = settings.llm.converted_dir or settings.model_dir / "converted"
    return convert_gguf(model_path(settings, key), root.expanduser() / spec.artifact)


def shared_engine(
    settings: Settings, key: str, *, backend: Backend | None = None
) -> LLMEngine[Any]:
    """One engine per (backend, model, LLM settings) in this process, built on first use.

    Roles that name the same model (judge, entailment checker, debater) share its
    weights and its prefix cache.
    """
    chosen = backend or settings.llm_backend
    spec = settings.model_spec(key)
    identity = (
        chosen,
        spec.model_dump_json(),
        settings.llm.model_dump_json(),
        str(settings.model_dir),
        settings.device,
    )
    with _shared_lock:
        engine = _shared.get(identity)
        if engine is None:
            engine = _shared[identity] = create_engine(settings, key, backend=chosen)
        return engine


def release_shared_engines() -> int:
    """Forget every engine :func:`shared_engine` built; returns how many.

    Their weights are freed once nothing else holds the engines. A long-lived process
    that moves between profiles or LLM settings calls this to keep one set of models in
    memory instead of one per settings it has seen (a 1.5B model in float32 is ~6 GB).
    """
    with _shared_lock:
        count = len(_shared)
        _shared.clear()
    return count
