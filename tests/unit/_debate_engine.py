"""A TEST DOUBLE of the LLM engine for the debate protocol's unit tests.

``ScriptedEngine`` is a real :class:`~tribunal.core.llm.LLMEngine` subclass (so the
engine's own batching, usage accounting and JSON retry loop run) whose model is a
script: a function from the rendered conversation to the answer text. It exists
because a real small model cannot be steered into "agree in round 1" or "disagree in
both rounds" on demand; the real models are exercised in
tests/integration/test_debate_*.py.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from tribunal.core.llm import LLMEngine, Prompt, Usage
from tribunal.core.llm._types import Generation
from tribunal.core.settings import LLMSettings

Script = Callable[[str], str]


def turn_json(label: str, evidence: str = "Paris", rationale: str = "because") -> str:
    return json.dumps({"label": label, "evidence": evidence, "rationale": rationale})


def agent_and_round(text: str) -> tuple[str, int]:
    """Which agent and round a debate prompt is for (read from the rendered text)."""
    agent = re.search(r"You are Agent ([AB]);", text)
    number = re.search(r"Round (\d)\.", text)
    assert agent, text
    assert number, text
    return agent.group(1), int(number.group(1))


def by_turn(labels: Mapping[tuple[str, int], str]) -> Script:
    """A script answering each (agent, round) with the given label (valid JSON)."""

    def script(text: str) -> str:
        if "Final arguments" in text:  # the adjudicator
            return json.dumps({"label": labels.get(("J", 0), "relevant"), "rationale": "judged"})
        return turn_json(labels[agent_and_round(text)])

    return script


class ScriptedEngine(LLMEngine[str]):
    """Test double: answers come from ``script``; every generate call is recorded."""

    backend = "transformers"

    def __init__(self, script: Script, *, name: str = "scripted", batch_size: int = 8) -> None:
        super().__init__(
            model_key=name,
            model_name=name,
            settings=LLMSettings(batch_size=batch_size, max_new_tokens=256),
        )
        self.script = script
        self.calls: list[list[str]] = []
        """Per ``generate`` call of the engine's public API: the conversations it got."""

    def _prepare(self, prompt: Prompt) -> str:
        return "\n".join(f"<{m.role}>{m.content}" for m in prompt.messages)

    def _length(self, prepared: str) -> int:
        return len(prepared) // 4

    def _score_batch(self, batch: list[str]) -> tuple[list[tuple[float, float]], Usage]:
        raise NotImplementedError

    def _generate_batch(
        self, batch: list[str], max_new_tokens: int, grammar: Mapping[str, Any] | None
    ) -> list[Generation]:
        self.calls.append(list(batch))
        return [
            Generation(
                text=(answer := self.script(text)),
                finish_reason="stop",
                usage=Usage(prompt_tokens=len(text) // 4, completion_tokens=len(answer) // 4),
            )
            for text in batch
        ]
