"""The LLM yes/no support checker: P(yes) to "does the evidence support the claim?"."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.llm import LLMEngine
from ..prompts import PromptTemplate, get_prompt
from ._checkers import SupportScore

__all__ = ["LlmSupportChecker"]


class LlmSupportChecker:
    """Scores pairs with one forward pass each through the LLM engine.

    Args:
        engine: A loaded engine (``shared_engine``: roles on the same model share it).
        template: An ``entailment`` prompt with ``evidence`` and ``claim`` fields;
            the registry's default when None. Evidence comes first in the prompt, so
            claims checked against the same chunk reuse its KV cache.
    """

    def __init__(self, engine: LLMEngine[Any], template: PromptTemplate | None = None) -> None:
        self.engine = engine
        self.template = template or get_prompt("entailment")
        self.model_id = engine.model_name
        self.prompt_id = self.template.id

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[SupportScore]:
        prompts = [
            self.template.render(self.engine, evidence=premise, claim=hypothesis)
            for premise, hypothesis in pairs
        ]
        batch = self.engine.judge(prompts)
        per_item = batch.usage.prompt_tokens // len(prompts) if prompts else 0
        return [SupportScore(p, None, per_item) for p in batch.p_yes]
