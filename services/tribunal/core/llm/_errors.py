"""Errors of the LLM engine (placed in the tree of :mod:`tribunal.core._errors`)."""

from __future__ import annotations

from .._errors import InternalError, ResourceExhaustedError

__all__ = ["MalformedOutputError", "PromptTooLongError"]


class PromptTooLongError(ResourceExhaustedError):
    """A prompt needs more tokens than the engine accepts (``llm.max_prompt_tokens``).

    The engine never cuts a prompt itself; templates cut their truncatable field
    (:meth:`tribunal.prompts.PromptTemplate.render`) and raise this when even the
    fixed parts do not fit.
    """

    def __init__(self, message: str, *, tokens: int, limit: int, field: str | None = None) -> None:
        super().__init__(message, field=field)
        self.tokens = tokens
        self.limit = limit


class MalformedOutputError(InternalError):
    """The model's output did not validate against the schema, even after the retries.

    Nothing is made up in its place: callers fail closed.
    """

    def __init__(
        self, message: str, *, attempts: int, outputs: list[str], field: str | None = None
    ) -> None:
        super().__init__(message, field=field)
        self.attempts = attempts
        self.outputs = outputs
        """Every invalid answer, first to last."""
