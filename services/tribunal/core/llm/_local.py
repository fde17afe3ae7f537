"""What the in-process backends (transformers, llama.cpp) share: token-level prompts."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from ._engine import LLMEngine
from ._types import Usage
from ._yesno import YesNoTokens, p_yes_from_logits

__all__ = ["LocalEngine", "common_prefix_length"]

Tokens = tuple[int, ...]


def common_prefix_length(first: Sequence[int], second: Sequence[int]) -> int:
    """How many leading tokens two sequences share."""
    length = 0
    for a, b in zip(first, second, strict=False):
        if a != b:
            break
        length += 1
    return length


class LocalEngine(LLMEngine[Tokens]):
    """A model in this process: prompts are token ids after the model's chat template.

    Prompts sort by their tokens, so that prompts sharing a prefix run one after the
    other and the prefix KV cache is hit (results come back in the caller's order).
    """

    yes_no: YesNoTokens
    """The model's single-token yes/no spellings."""

    @abc.abstractmethod
    def _last_logits(self, batch: list[Tokens]) -> tuple[npt.NDArray[np.float32], Usage]:
        """Next-token logits after each prompt, shape (batch, vocabulary)."""

    def _length(self, prepared: Tokens) -> int:
        return len(prepared)

    def _sort_key(self, prepared: Tokens) -> Any:
        return prepared if self.settings.prefix_cache else None

    def _score_batch(self, batch: list[Tokens]) -> tuple[list[tuple[float, float]], Usage]:
        logits, usage = self._last_logits(batch)
        return [p_yes_from_logits(row, self.yes_no) for row in logits], usage
