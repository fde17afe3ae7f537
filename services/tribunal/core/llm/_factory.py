"""Building the engine for a profile's model key and backend."""

from __future__ import annotations

import threading
from typing import Any, Literal

from .._errors import ConfigError
from .._loading import model_path, resolve_device
from ..models import get_artifact
from ..settings import Settings
from ._engine import LLMEngine

__all__ = ["Backend", "create_engine", "shared_engine"]

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
    from ._transformers import TransformersEngine, convert_gguf

    source: Any = spec.hf_id
    if spec.artifact is not None:
        root = llm.converted_dir or settings.model_dir / "converted"
        source = convert_gguf(model_path(settings, key), root.expanduser() / spec.artifact)
    return TransformersEngine(
        model_key=key,
        model_name=name,
        source=source,
        device=resolve_device(settings),
        settings=llm,
    )


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
