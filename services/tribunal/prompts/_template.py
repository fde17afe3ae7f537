"""Versioned prompt templates, laid out for prefix reuse, and their registry."""

from __future__ import annotations

import string
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tribunal.core import InvalidArgumentError, NotFoundError
from tribunal.core.llm import LLMEngine, Message, Prompt, PromptTooLongError

__all__ = ["PromptTemplate", "get_prompt", "list_prompts", "register"]

_ELLIPSIS = " […]"


@dataclass(frozen=True)
class PromptTemplate:
    """One named, versioned prompt for one role.

    The rendered conversation is ``system`` (optional), then one user message:
    ``instructions`` + the ``item`` filled with the fields + ``question``. Everything
    before the item is identical across items, so the engine computes it once
    (prefix reuse); the short fixed ``question`` after the item keeps the answer
    format in the model's view.

    Truncation policy: a prompt longer than the engine's ``llm.max_prompt_tokens``
    has its ``truncatable`` field (the passage or evidence, never the query or the
    claim) cut at a word boundary, from the end, marked with " […]"; if the prompt
    still does not fit with that field empty, :class:`PromptTooLongError` is raised.
    """

    role: str
    """What the prompt is for: ``relevance``, ``entailment``, ``matching``, ..."""
    name: str
    """Variant of the role, e.g. ``yesno``."""
    version: int
    """Bumped whenever the text changes, so recorded results stay attributable."""
    instructions: str
    item: str
    """``str.format`` template of the item-specific text."""
    question: str = ""
    system: str = ""
    truncatable: str | None = None
    """The field cut to fit the prompt-length bound."""
    description: str = ""

    def __post_init__(self) -> None:
        if self.truncatable is not None and self.truncatable not in self.fields:
            raise ValueError(f"{self.id}: truncatable field {self.truncatable!r} not in the item")

    @property
    def id(self) -> str:
        """``role/name@version``, recorded with every result."""
        return f"{self.role}/{self.name}@{self.version}"

    @property
    def fields(self) -> tuple[str, ...]:
        """Names the item template needs."""
        return tuple(
            name for _, name, _, _ in string.Formatter().parse(self.item) if name is not None
        )

    def _build(self, values: Mapping[str, str]) -> Prompt:
        parts = [self.instructions, self.item.format_map(values), self.question]
        user = "\n\n".join(p for p in parts if p)
        turns = (Message("system", self.system),) if self.system else ()
        return Prompt((*turns, Message("user", user)), prompt_id=self.id)

    def render(self, fit: LLMEngine[Any] | None = None, /, **values: str) -> Prompt:
        """The prompt for one item; with ``fit``, cut to that engine's prompt-length bound.

        Raises:
            InvalidArgumentError: a field is missing or unknown.
            PromptTooLongError: it cannot fit even with the truncatable field emptied.
        """
        missing = set(self.fields) - set(values)
        extra = set(values) - set(self.fields)
        if missing or extra:
            raise InvalidArgumentError(
                f"{self.id} needs fields {sorted(self.fields)}; missing {sorted(missing)}, "
                f"unknown {sorted(extra)}",
                field=sorted(missing or extra)[0],
            )
        prompt = self._build(values)
        if fit is None:
            return prompt
        limit = fit.settings.max_prompt_tokens
        if fit.count_tokens(prompt) <= limit:
            return prompt
        if self.truncatable is None:
            raise self._too_long(fit.count_tokens(prompt), limit)
        text = values[self.truncatable]
        words = text.split(" ")

        def with_words(count: int) -> Prompt:
            cut = " ".join(words[:count]) + _ELLIPSIS if count < len(words) else text
            return self._build({**values, self.truncatable: cut})  # type: ignore[dict-item]

        if fit.count_tokens(with_words(0)) > limit:
            raise self._too_long(fit.count_tokens(with_words(0)), limit)
        low, high = 0, len(words) - 1  # with_words(low) fits; with_words(len) does not
        while low < high:
            middle = (low + high + 1) // 2
            if fit.count_tokens(with_words(middle)) <= limit:
                low = middle
            else:
                high = middle - 1
        return with_words(low)

    def _too_long(self, tokens: int, limit: int) -> PromptTooLongError:
        return PromptTooLongError(
            f"{self.id} does not fit in {limit} tokens (llm.max_prompt_tokens) even with "
            f"{self.truncatable or 'no field'} cut: {tokens} tokens",
            tokens=tokens,
            limit=limit,
            field=next((f for f in self.fields if f != self.truncatable), None),
        )


_registry: dict[tuple[str, str], dict[int, PromptTemplate]] = {}
_defaults: dict[str, str] = {}
_lock = threading.Lock()


def register(template: PromptTemplate, *, default: bool = False) -> PromptTemplate:
    """Add a template; ``default`` makes its name the role's default variant."""
    with _lock:
        versions = _registry.setdefault((template.role, template.name), {})
        if template.version in versions and versions[template.version] != template:
            raise ValueError(f"{template.id} is registered with a different text")
        versions[template.version] = template
        if default or template.role not in _defaults:
            _defaults[template.role] = template.name
    return template


def get_prompt(role: str, name: str | None = None, version: int | None = None) -> PromptTemplate:
    """A registered template: the role's default variant and its latest version by default.

    ``role`` may also be a full id, ``role/name@version``.

    Raises:
        NotFoundError: no such role, variant or version.
    """
    if "/" in role:
        role, rest = role.split("/", 1)
        name, _, number = rest.partition("@")
        version = int(number) if number else version
    with _lock:
        chosen = name or _defaults.get(role)
        versions = _registry.get((role, chosen or ""))
        if not versions:
            raise NotFoundError(
                f"no prompt {role}/{chosen}; known: {', '.join(_known_ids())}",
                field="prompt",
            )
        if version is None:
            return versions[max(versions)]
        if version not in versions:
            raise NotFoundError(
                f"no version {version} of {role}/{chosen}; known: {sorted(versions)}",
                field="prompt",
            )
        return versions[version]


def _known_ids() -> list[str]:
    return sorted(t.id for versions in _registry.values() for t in versions.values())


def list_prompts() -> list[PromptTemplate]:
    """Every registered template, by id."""
    with _lock:
        return sorted(
            (t for versions in _registry.values() for t in versions.values()), key=lambda t: t.id
        )
