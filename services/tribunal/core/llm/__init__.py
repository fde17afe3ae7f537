"""The LLM engine: batched yes/no judging and schema-validated JSON generation.

Every LLM role (judges, entailment checker, debaters, adjudicator) asks a model two
things, built once here:

- :meth:`LLMEngine.p_yes` / :meth:`LLMEngine.judge`: P(yes) for each prompt from one
  forward pass, Σp(yes spellings) / (Σp(yes) + Σp(no)) over the next token;
- :meth:`LLMEngine.generate_json`: a greedy answer validated against a pydantic model
  or JSON schema, retried a bounded number of times, else :class:`MalformedOutputError`.

Backends (``llm_backend`` in the profile, or ``backend=``): ``transformers`` (batched,
GPU when present; GGUF artifacts converted once and cached), ``llamacpp`` (the fast
CPU path; optional extra) and ``openai`` (any OpenAI-compatible server). Chat
templates come from the model. Build prompts instructions-first, item-last
(:mod:`tribunal.prompts` does): the shared prefix's KV cache is reused.

    engine = shared_engine(load_settings("tiny"), "llm_strong", backend="llamacpp")
    engine.p_yes(["Is Paris the capital of France? Answer yes or no."])  # [0.97]
"""

from ._engine import LLMEngine
from ._errors import MalformedOutputError, PromptTooLongError
from ._factory import (
    Backend,
    converted_source,
    create_engine,
    release_shared_engines,
    shared_engine,
)
from ._json import extract_json
from ._types import Message, Prompt, Usage

__all__ = [
    "Backend",
    "LLMEngine",
    "MalformedOutputError",
    "Message",
    "Prompt",
    "PromptTooLongError",
    "Usage",
    "converted_source",
    "create_engine",
    "extract_json",
    "release_shared_engines",
    "shared_engine",
]
