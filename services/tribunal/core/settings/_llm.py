"""The LLM engine: prompt limits, batching, caches and the backends' options."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ._base import Section

__all__ = ["LLMSettings"]


class LLMSettings(Section):
    """The LLM engine (:mod:`tribunal.core.llm`): limits, batching, caches, backends."""

    max_prompt_tokens: int = Field(4096, ge=64, le=1_000_000)
    """Longest prompt accepted, in tokens after the chat template; prompt templates cut their
    truncatable field to fit, and a prompt that still does not fit is refused."""
    max_new_tokens: int = Field(256, ge=1, le=32_768)
    """Default bound on generated tokens (JSON and free text)."""
    batch_size: int = Field(8, ge=1, le=1024)
    """Most prompts in one forward pass; longer lists are split."""
    n_threads: int | None = Field(None, ge=1, le=1024)
    """CPU threads for llama.cpp and torch; null keeps the libraries' defaults."""
    prefix_cache: bool = True
    """Reuse the KV cache of the prompt prefix shared with the previous prompts."""
    response_cache: Path | None = None
    """SQLite file of answers reused across calls, processes and runs (decoding is greedy,
    so an answer is a function of model and prompt): for evaluations, sweeps and bulk
    jobs; null (the default, and for serving): off. A reused answer carries the cost of
    the run that computed it."""
    json_retries: int = Field(2, ge=0, le=10)
    """Extra attempts when generated JSON is invalid, each told what was wrong."""
    json_grammar: Literal["never", "retry", "always"] = "retry"
    """When to constrain JSON decoding by the schema's grammar (llama.cpp, OpenAI servers):
    grammar decoding is ~2x slower on CPU, so by default only retries use it."""
    torch_dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    """transformers weights dtype; ``auto`` is bfloat16 on GPUs and on CPUs with native
    bfloat16 instructions (AMX, AVX512-BF16), float32 elsewhere (an AVX2-only CPU
    emulates bfloat16 at about a third of float32's speed)."""
    converted_dir: Path | None = None
    """Where GGUF files converted for transformers are kept; null: ``model_dir/converted``."""
    openai_base_url: str = "http://127.0.0.1:8000/v1"
    """OpenAI-compatible server (vLLM, llama.cpp server), up to and including ``/v1``."""
    openai_api_key: str = ""
    """Bearer token for the server; empty sends none."""
    openai_model: str = ""
    """Model name the server knows; empty: the profile's ``hf_id`` or artifact id."""
    openai_timeout_s: float = Field(120.0, gt=0.0, le=3600.0)
    """Per-request timeout, in seconds."""
    openai_concurrency: int = Field(8, ge=1, le=1024)
    """Requests in flight at once (the server batches them)."""
    openai_top_logprobs: int = Field(20, ge=1, le=20)
    """Alternatives asked per token to read P(yes) from."""
    openai_response_format: Literal["json_schema", "json_object"] = "json_schema"
    """How a grammar-constrained JSON request is phrased: OpenAI's ``json_schema`` (vLLM),
    or ``json_object`` with a ``schema`` (llama-cpp-python's server)."""
