"""The persistent answer cache (``llm.response_cache``) on a real model (SmolLM2-135M).

A second engine on the same file (as a second process or a later run would be) must
return the first engine's answers exactly, computing nothing, and report the cost the
first run paid.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel
from tribunal.core import Settings
from tribunal.core.llm import LLMEngine, MalformedOutputError, create_engine

from ._llm_backend import LLM_BACKEND

pytestmark = pytest.mark.models

QUESTIONS = [
    "Is Paris the capital of France? Answer yes or no.",
    "Is Berlin the capital of France? Answer yes or no.",
    "Is water wet? Answer yes or no.",
]


class Capital(BaseModel):
    city: str


def _capital(engine: LLMEngine) -> tuple[object, int]:
    """The JSON answer and its attempts; SmolLM2-135M writes no valid object on transformers,
    and then the failure, with every invalid attempt, is what the cache must replay."""
    try:
        answer = engine.generate_json(
            ["What is the capital of France?"], Capital, max_new_tokens=24
        )
    except MalformedOutputError as failed:
        return failed.outputs, failed.attempts
    return answer[0].value, answer[0].attempts


def _engine(settings: Settings, cache: Path) -> LLMEngine:
    llm = settings.llm.model_copy(update={"response_cache": cache, "n_threads": 1})
    return create_engine(settings.model_copy(update={"llm": llm}), "llm_tiny", backend=LLM_BACKEND)


def test_a_second_engine_reuses_scores_and_generations(
    tiny_settings: Settings, tmp_path: Path
) -> None:
    cache = tmp_path / "answers.sqlite"
    first = _engine(tiny_settings, cache)
    scored = first.judge(QUESTIONS)
    generated = first.generate(["Name one colour."], max_new_tokens=8)
    as_json, attempts = _capital(first)
    assert first.response_cache is not None
    assert (first.response_cache.hits, first.response_cache.misses) == (0, 3 + 1 + attempts)
    first.close()

    second = _engine(tiny_settings, cache)
    again = second.judge(QUESTIONS)
    assert again.p_yes == scored.p_yes
    assert again.yes_no_mass == scored.yes_no_mass
    assert again.usage.prompt_tokens == scored.usage.prompt_tokens  # the first run's cost
    regenerated = second.generate(["Name one colour."], max_new_tokens=8)
    assert [g.text for g in regenerated] == [g.text for g in generated]
    assert regenerated[0].usage.completion_tokens == generated[0].usage.completion_tokens
    assert _capital(second) == (as_json, attempts)
    assert second.usage.calls == 0  # nothing was computed
    assert second.response_cache is not None
    assert second.response_cache.misses == 0

    # Another decoding bound is another question.
    second.generate(["Name one colour."], max_new_tokens=4)
    assert second.response_cache.misses == 1
    assert second.usage.calls == 1
    second.close()
