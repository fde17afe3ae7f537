"""Small real probes that show an installed model loads and behaves."""

from __future__ import annotations

from typing import Any

from ..core import Settings, load_embedder, model_path

__all__ = ["probe_model"]

_PARAPHRASE = ("How does COVID-19 spread?", "In what ways is the coronavirus transmitted?")
_UNRELATED = "What is the capital of France?"


def probe_model(settings: Settings, key: str) -> str:
    """Load model ``key`` and return a one-line report of what it did."""
    spec = settings.model_spec(key)
    if spec.artifact is None:
        return f"hub model {spec.hf_id}: not probed offline"
    if spec.kind == "embedder":
        return _probe_embedder(settings, key)
    if spec.kind == "llm":
        return _probe_gguf(settings, key)
    return f"{spec.kind}: no probe"


def _probe_embedder(settings: Settings, key: str) -> str:
    # A profile may hold more than one embedder (a larger one used only as a relevance
    # feature): load the one probed.
    model = load_embedder(settings, key)
    vectors = model.encode([*_PARAPHRASE, _UNRELATED], normalize_embeddings=True)
    paraphrase = float(vectors[0] @ vectors[1])
    unrelated = float(vectors[0] @ vectors[2])
    return (
        f"embedder dim={vectors.shape[1]} cos(paraphrase)={paraphrase:.2f} "
        f"cos(unrelated)={unrelated:.2f}"
    )


def _probe_gguf(settings: Settings, key: str) -> str:
    # Reading the GGUF header validates the file without loading weights; the
    # LLM engine (its own issue) runs the yes/no probe.
    from gguf import GGUFReader

    reader = GGUFReader(str(model_path(settings, key)))

    def field(name: str) -> Any:
        found = reader.fields.get(name)
        return found.contents() if found is not None else None

    arch = field("general.architecture")
    header = (
        f"gguf {field('general.name')!s} arch={arch} tensors={len(reader.tensors)} "
        f"context={field(f'{arch}.context_length')} "
        f"chat_template={'yes' if field('tokenizer.chat_template') else 'no'}"
    )
    return f"{header} {_probe_yes_no(settings, key)}"


def _probe_yes_no(settings: Settings, key: str) -> str:
    """P(yes) of two capital questions through the LLM engine (llama.cpp: loads in ~1 s)."""
    import importlib.util

    if importlib.util.find_spec("llama_cpp") is None:
        return "(yes/no probe needs llama-cpp-python)"
    from ..core.llm import create_engine

    engine = create_engine(settings, key, backend="llamacpp")
    try:
        paris, berlin = engine.p_yes(
            [f"Is {city} the capital of France? Answer yes or no." for city in ("Paris", "Berlin")]
        )
    finally:
        engine.close()
    return f"p_yes(paris)={paris:.2f} p_yes(berlin)={berlin:.2f}"
