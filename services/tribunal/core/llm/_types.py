"""Values the LLM engine takes and returns: prompts, usage, results."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

__all__ = [
    "Generation",
    "JsonResult",
    "Message",
    "Prompt",
    "PromptLike",
    "Usage",
    "YesNoBatch",
    "as_prompt",
]

Role = Literal["system", "user", "assistant"]
T = TypeVar("T")


@dataclass(frozen=True)
class Message:
    """One chat turn."""

    role: Role
    content: str


@dataclass(frozen=True)
class Prompt:
    """A chat conversation the engine renders with the model's own chat template.

    Build prompts instructions-first, item-last: the engine reuses the KV cache of the
    prefix shared with the previous prompts, so everything before the item-specific
    text is computed once.
    """

    messages: tuple[Message, ...]
    prompt_id: str | None = None
    """``role/name@version`` of the template that made it (see :mod:`tribunal.prompts`)."""

    @classmethod
    def user(cls, text: str, *, system: str | None = None, prompt_id: str | None = None) -> Prompt:
        """A one-question conversation, with an optional system message."""
        turns = [Message("system", system)] if system else []
        return cls((*turns, Message("user", text)), prompt_id)

    def extended(self, *turns: Message) -> Prompt:
        """The same conversation with more turns appended (for retries)."""
        return Prompt((*self.messages, *turns), self.prompt_id)

    def as_dicts(self) -> list[dict[str, str]]:
        """Messages as chat-template / OpenAI dictionaries."""
        return [{"role": m.role, "content": m.content} for m in self.messages]


PromptLike = Prompt | str
"""A :class:`Prompt`, or a plain string taken as one user message."""


def as_prompt(prompt: PromptLike) -> Prompt:
    """Normalise a plain string to a one-message :class:`Prompt`."""
    return prompt if isinstance(prompt, Prompt) else Prompt.user(prompt)


@dataclass(frozen=True)
class Usage:
    """What a call cost: tokens read and written, and wall time."""

    prompt_tokens: int = 0
    """Prompt tokens of the call, after the chat template."""
    cached_tokens: int = 0
    """Of those, how many came from the prefix KV cache instead of being computed."""
    completion_tokens: int = 0
    """Generated tokens (0 for P(yes) scoring: one forward pass, nothing sampled)."""
    seconds: float = 0.0
    """Wall time."""
    calls: int = 0
    """Prompts processed."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.cached_tokens + other.cached_tokens,
            self.completion_tokens + other.completion_tokens,
            self.seconds + other.seconds,
            self.calls + other.calls,
        )


@dataclass(frozen=True)
class YesNoBatch(Sequence[float]):
    """P(yes) for each prompt of a batch; behaves as a sequence of those floats."""

    p_yes: list[float]
    """P(yes) = Σp(yes variants) / (Σp(yes variants) + Σp(no variants))."""
    yes_no_mass: list[float]
    """Σp(yes) + Σp(no): how much of the next-token distribution was an answer at all
    (low mass means the model wanted to say something else; treat with care)."""
    prompt_ids: list[str | None]
    """Template id of each prompt."""
    usage: Usage = field(default_factory=Usage)

    def __len__(self) -> int:
        return len(self.p_yes)

    def __getitem__(self, index: int) -> float:  # type: ignore[override]
        return self.p_yes[index]


@dataclass(frozen=True)
class Generation:
    """Text generated greedily for one prompt."""

    text: str
    finish_reason: str
    """``stop`` (end of turn or a stop string), ``length`` (hit max_new_tokens)."""
    usage: Usage
    prompt_id: str | None = None


@dataclass(frozen=True)
class JsonResult(Generic[T]):
    """A generated JSON value that passed schema validation."""

    value: T
    """The validated value: a pydantic model instance, or the parsed JSON for a JSON schema."""
    raw: str
    """The text the value was parsed from."""
    attempts: int
    """1 when the first answer was valid; more when retries were needed."""
    usage: Usage
    """All attempts together."""
    prompt_id: str | None = None
