"""The engine interface every backend implements: P(yes) and JSON generation, batched.

The public calls live here once: argument checks, the prompt-length bound, ordering
prompts so that shared prefixes are adjacent, splitting into batches, locking,
usage accounting and the JSON validate-and-retry loop. Backends implement the four
``_``-hooks for one batch.
"""

from __future__ import annotations

import abc
import asyncio
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Generic, TypeVar, overload

from pydantic import BaseModel

from .._deadline import check_deadline
from .._errors import InvalidArgumentError
from ..settings import LLMSettings
from ._cache import (
    ResponseCache,
    cache_key,
    generation_from_dict,
    generation_to_dict,
    usage_from_dict,
    usage_to_dict,
)
from ._errors import MalformedOutputError, PromptTooLongError
from ._json import SchemaLike, SchemaValidator
from ._types import (
    Generation,
    JsonResult,
    Message,
    Prompt,
    PromptLike,
    Usage,
    YesNoBatch,
    as_prompt,
)

__all__ = ["LLMEngine"]

P = TypeVar("P")
M = TypeVar("M", bound=BaseModel)


class LLMEngine(abc.ABC, Generic[P]):
    """One loaded model behind two calls: :meth:`p_yes` and :meth:`generate_json`.

    Thread-safe: one batch runs on the model at a time (a lock per batch, so long
    lists from several callers interleave). From asyncio use :meth:`ap_yes`, which
    runs the work in a thread. ``P`` is the backend's prepared form
    of a prompt (token ids for local backends).
    """

    backend: ClassVar[str]
    """``transformers``, ``llamacpp`` or ``openai``."""

    def __init__(self, *, model_key: str, model_name: str, settings: LLMSettings) -> None:
        self.model_key = model_key
        """Key of the model in the profile."""
        self.model_name = model_name
        """Artifact id, hub id or served model name."""
        self.settings = settings
        self._model_lock = threading.Lock()
        self._usage_lock = threading.Lock()
        self._usage = Usage()
        self._cache = (
            ResponseCache(settings.response_cache) if settings.response_cache is not None else None
        )

    # ----------------------------------------------------------------- backend hooks
    @abc.abstractmethod
    def _prepare(self, prompt: Prompt) -> P:
        """Render the chat template (and tokenize, for local models)."""

    @abc.abstractmethod
    def _length(self, prepared: P) -> int:
        """Prompt length in tokens (an upper estimate where the tokenizer is remote)."""

    @abc.abstractmethod
    def _score_batch(self, batch: list[P]) -> tuple[list[tuple[float, float]], Usage]:
        """(P(yes), yes+no mass) per prompt, one forward pass each; runs under the lock."""

    @abc.abstractmethod
    def _generate_batch(
        self, batch: list[P], max_new_tokens: int, grammar: Mapping[str, Any] | None
    ) -> list[Generation]:
        """Greedy generation, optionally constrained to JSON schema ``grammar``; under the lock."""

    def _sort_key(self, prepared: P) -> Any:
        """Key that places prompts with shared prefixes next to each other; None: keep order."""
        return None

    def close(self) -> None:
        """Release the model (backends with native resources override this)."""

    @property
    def response_cache(self) -> ResponseCache | None:
        """The persistent answer cache (``llm.response_cache``), None when off."""
        return self._cache

    # ----------------------------------------------------------------- public calls
    @property
    def usage(self) -> Usage:
        """Everything this engine has done so far."""
        with self._usage_lock:
            return self._usage

    def count_tokens(self, prompt: PromptLike) -> int:
        """Tokens the prompt takes after the chat template (estimated for remote servers)."""
        return self._length(self._prepare(as_prompt(prompt)))

    def judge(self, prompts: Sequence[PromptLike]) -> YesNoBatch:
        """P(yes) for each prompt, with the yes/no mass, prompt ids and usage.

        Raises:
            PromptTooLongError: a prompt is longer than ``llm.max_prompt_tokens``.
        """
        items = [as_prompt(p) for p in prompts]
        started = time.perf_counter()
        prepared = self._prepare_all(items)
        keys = self._cache_keys("p_yes", items)
        cached = self._cache.get_many(keys) if self._cache is not None and keys else {}
        scores: list[tuple[float, float]] = [(0.0, 0.0)] * len(items)
        reused = Usage()
        todo: list[int] = []
        for index in range(len(items)):
            hit = cached.get(keys[index]) if keys else None
            if hit is None:
                todo.append(index)
                continue
            scores[index] = (float(hit["p_yes"]), float(hit["mass"]))
            reused += usage_from_dict(hit["usage"])
        usage = Usage()
        fresh: dict[str, dict[str, Any]] = {}
        for batch in self._batches([prepared[i] for i in todo]):
            # Work for a caller whose deadline passed stops before the next model call.
            check_deadline("the model's batches")
            batch_started = time.perf_counter()
            with self._model_lock:
                values, batch_usage = self._score_batch([prepared[todo[j]] for j in batch])
            usage += batch_usage
            share = (time.perf_counter() - batch_started) / len(batch)
            for j, value in zip(batch, values, strict=True):
                index = todo[j]
                scores[index] = value
                if keys:
                    one = Usage(prompt_tokens=self._length(prepared[index]), seconds=share, calls=1)
                    fresh[keys[index]] = {
                        "p_yes": value[0],
                        "mass": value[1],
                        "usage": usage_to_dict(one),
                    }
        usage = replace(usage, seconds=time.perf_counter() - started, calls=len(todo))
        self._account(usage)
        self._remember(fresh, hits=len(items) - len(todo))
        return YesNoBatch(
            p_yes=[s[0] for s in scores],
            yes_no_mass=[s[1] for s in scores],
            prompt_ids=[p.prompt_id for p in items],
            usage=usage + reused,
        )

    def p_yes(self, prompts: Sequence[PromptLike]) -> list[float]:
        """P(yes) for each prompt: Σp(yes) / (Σp(yes) + Σp(no)) over the next token."""
        return self.judge(prompts).p_yes

    def generate(
        self, prompts: Sequence[PromptLike], *, max_new_tokens: int | None = None
    ) -> list[Generation]:
        """Greedy (temperature 0) free-text answers, one per prompt."""
        return self._generate_all([as_prompt(p) for p in prompts], max_new_tokens, None)

    @overload
    def generate_json(
        self,
        prompts: Sequence[PromptLike],
        schema: type[M],
        *,
        max_new_tokens: int | None = None,
        retries: int | None = None,
    ) -> list[JsonResult[M]]: ...

    @overload
    def generate_json(
        self,
        prompts: Sequence[PromptLike],
        schema: Mapping[str, Any],
        *,
        max_new_tokens: int | None = None,
        retries: int | None = None,
    ) -> list[JsonResult[Any]]: ...

    def generate_json(
        self,
        prompts: Sequence[PromptLike],
        schema: SchemaLike,
        *,
        max_new_tokens: int | None = None,
        retries: int | None = None,
    ) -> list[JsonResult[Any]]:
        """Greedy JSON answers validated against ``schema`` (pydantic model or JSON schema).

        The schema is stated in the system message (before the item, so the prefix stays
        shared). An invalid answer is retried up to ``retries`` times (default
        ``llm.json_retries``), each retry told what was wrong and, per
        ``llm.json_grammar``, decoded under the schema's grammar where the backend can.

        Raises:
            MalformedOutputError: an answer was still invalid after the retries; its
                ``field`` names the first such prompt, ``outputs`` holds its answers.
            PromptTooLongError: a prompt does not fit.
        """
        validator: SchemaValidator[Any] = SchemaValidator(schema)
        budget = self.settings.json_retries if retries is None else retries
        if budget < 0:
            raise InvalidArgumentError("retries must be >= 0", field="retries")
        items = [as_prompt(p) for p in prompts]
        conversations = [_with_instruction(p, validator.instruction()) for p in items]
        results: list[JsonResult[Any] | None] = [None] * len(items)
        outputs: list[list[str]] = [[] for _ in items]
        usages = [Usage() for _ in items]
        pending = list(range(len(items)))
        for attempt in range(budget + 1):
            grammar_mode = self.settings.json_grammar
            use_grammar = grammar_mode == "always" or (grammar_mode == "retry" and attempt > 0)
            try:
                generations = self._generate_all(
                    [conversations[i] for i in pending],
                    max_new_tokens,
                    validator.json_schema if use_grammar else None,
                )
            except PromptTooLongError:
                if attempt == 0:
                    raise
                break  # the retry conversation outgrew the limit: report the invalid answers
            for index, generation in zip(pending, generations, strict=True):
                usages[index] += generation.usage
                try:
                    value = validator.validate(generation.text)
                except ValueError as exc:
                    outputs[index].append(generation.text)
                    conversations[index] = conversations[index].extended(
                        Message("assistant", generation.text),
                        Message(
                            "user",
                            f"That answer is not valid: {exc}. Reply again with only the JSON "
                            f"value that matches the schema.",
                        ),
                    )
                    continue
                results[index] = JsonResult(
                    value=value,
                    raw=generation.text,
                    attempts=attempt + 1,
                    usage=usages[index],
                    prompt_id=items[index].prompt_id,
                )
            pending = [i for i in pending if results[i] is None]
            if not pending:
                break
        if pending:
            first = pending[0]
            raise MalformedOutputError(
                f"{len(pending)} of {len(items)} answers did not match schema {validator.name} "
                f"after {len(outputs[first])} attempt(s); first invalid: prompts[{first}], "
                f"last answer {outputs[first][-1][:200]!r}",
                attempts=len(outputs[first]),
                outputs=outputs[first],
                field=f"prompts[{first}]",
            )
        return [r for r in results if r is not None]

    async def ap_yes(self, prompts: Sequence[PromptLike]) -> list[float]:
        """:meth:`p_yes` from asyncio (runs in a worker thread)."""
        return await asyncio.to_thread(self.p_yes, prompts)

    # ----------------------------------------------------------------- internals
    def _prepare_all(self, items: list[Prompt]) -> list[P]:
        prepared = [self._prepare(p) for p in items]
        limit = self.settings.max_prompt_tokens
        for index, one in enumerate(prepared):
            length = self._length(one)
            if length > limit:
                raise PromptTooLongError(
                    f"prompts[{index}] takes {length} tokens; the limit is {limit} "
                    "(llm.max_prompt_tokens): shorten the item, or render it with its "
                    "template's truncation",
                    tokens=length,
                    limit=limit,
                    field=f"prompts[{index}]",
                )
        return prepared

    def _batches(self, prepared: list[P]) -> list[list[int]]:
        """Indices in batches of ``llm.batch_size``, shared prefixes adjacent."""
        order = list(range(len(prepared)))
        keys = [self._sort_key(p) for p in prepared]
        if all(k is not None for k in keys):
            order.sort(key=lambda i: keys[i])
        size = self.settings.batch_size
        return [order[i : i + size] for i in range(0, len(order), size)]

    def _generate_all(
        self,
        items: list[Prompt],
        max_new_tokens: int | None,
        grammar: Mapping[str, Any] | None,
    ) -> list[Generation]:
        limit = self.settings.max_new_tokens
        budget = limit if max_new_tokens is None else max_new_tokens
        if not 1 <= budget <= limit:
            raise InvalidArgumentError(
                f"max_new_tokens must be between 1 and {limit} (llm.max_new_tokens)",
                field="max_new_tokens",
            )
        started = time.perf_counter()
        prepared = self._prepare_all(items)
        keys = self._cache_keys("generate", items, max_new_tokens=budget, grammar=grammar)
        cached = self._cache.get_many(keys) if self._cache is not None and keys else {}
        out: list[Generation | None] = [None] * len(items)
        for index, key in enumerate(keys):
            if key in cached:
                out[index] = generation_from_dict(cached[key], items[index].prompt_id)
        todo = [i for i, one in enumerate(out) if one is None]
        fresh: dict[str, dict[str, Any]] = {}
        computed = Usage()
        for batch in self._batches([prepared[i] for i in todo]):
            # Work for a caller whose deadline passed stops before the next model call.
            check_deadline("the model's batches")
            batch_started = time.perf_counter()
            with self._model_lock:
                generations = self._generate_batch(
                    [prepared[todo[j]] for j in batch], budget, grammar
                )
            # A batch runs together: each prompt is charged an equal share of its time.
            share = (time.perf_counter() - batch_started) / len(batch)
            for j, generation in zip(batch, generations, strict=True):
                index = todo[j]
                usage = replace(generation.usage, seconds=share)
                done = replace(generation, usage=usage, prompt_id=items[index].prompt_id)
                out[index] = done
                computed += usage
                if keys:
                    fresh[keys[index]] = generation_to_dict(done)
        self._account(replace(computed, seconds=time.perf_counter() - started, calls=len(todo)))
        self._remember(fresh, hits=len(items) - len(todo))
        return [g for g in out if g is not None]

    def _cache_keys(self, call: str, items: list[Prompt], **bounds: Any) -> list[str]:
        """Cache keys of the prompts; empty when ``llm.response_cache`` is off."""
        if self._cache is None:
            return []
        return [cache_key(self.backend, self.model_name, call, p, **bounds) for p in items]

    def _remember(self, fresh: dict[str, dict[str, Any]], *, hits: int) -> None:
        if self._cache is not None:
            self._cache.put_many(fresh)
            self._cache.count(hits, len(fresh))

    def _account(self, usage: Usage) -> None:
        with self._usage_lock:
            self._usage += usage

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model_key={self.model_key!r}, model={self.model_name!r})"


def _with_instruction(prompt: Prompt, instruction: str) -> Prompt:
    """The prompt with ``instruction`` appended to its system message (added if absent)."""
    messages = list(prompt.messages)
    if messages and messages[0].role == "system":
        messages[0] = Message("system", f"{messages[0].content}\n\n{instruction}")
    else:
        messages.insert(0, Message("system", instruction))
    return Prompt(tuple(messages), prompt.prompt_id)
