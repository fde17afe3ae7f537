"""OpenAI-compatible backend: any server with ``/v1/chat/completions`` (vLLM, llama.cpp).

P(yes) asks for one token with ``logprobs`` and ``top_logprobs`` and sums the yes/no
spellings among the alternatives. The server applies the model's chat template and
does the batching and prefix caching (vLLM's automatic prefix caching, llama.cpp's
prompt cache); this engine keeps up to ``llm.openai_concurrency`` requests in flight.
The tokenizer is remote, so the prompt-length bound is checked with an estimate
(4 characters a token) and the server's own context error maps to
:class:`PromptTooLongError`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import requests

from .._errors import InternalError, UnavailableError
from ..settings import LLMSettings
from ._engine import LLMEngine
from ._errors import PromptTooLongError
from ._types import Generation, Prompt, Usage
from ._yesno import p_yes_from_top_logprobs

__all__ = ["OpenAIEngine"]

_CHARS_PER_TOKEN = 4
_TEMPLATE_TOKENS_PER_MESSAGE = 8
R = TypeVar("R")


class OpenAIEngine(LLMEngine[Prompt]):
    """A model served over HTTP by an OpenAI-compatible server."""

    backend = "openai"

    def __init__(self, *, model_key: str, model_name: str, settings: LLMSettings) -> None:
        super().__init__(model_key=model_key, model_name=model_name, settings=settings)
        self._url = settings.openai_base_url.rstrip("/") + "/chat/completions"
        self._headers = {"Content-Type": "application/json"}
        if settings.openai_api_key:
            self._headers["Authorization"] = f"Bearer {settings.openai_api_key}"
        self._local = threading.local()
        self._pool = ThreadPoolExecutor(settings.openai_concurrency, thread_name_prefix="llm-http")

    # Requests from several callers may run at once: the server serialises or batches.
    def _prepare(self, prompt: Prompt) -> Prompt:
        return prompt

    def _length(self, prepared: Prompt) -> int:
        chars = sum(len(m.content) for m in prepared.messages)
        return chars // _CHARS_PER_TOKEN + _TEMPLATE_TOKENS_PER_MESSAGE * len(prepared.messages)

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            response = self._session().post(
                self._url,
                json={"model": self.model_name, "temperature": 0.0, **body},
                headers=self._headers,
                timeout=self.settings.openai_timeout_s,
            )
        except requests.RequestException as exc:
            raise UnavailableError(f"LLM server {self._url} unreachable: {exc}") from exc
        if response.status_code >= 400:
            text = response.text[:500]
            if response.status_code == 400 and "context" in text.lower():
                raise PromptTooLongError(
                    f"the server refused the prompt as too long: {text}", tokens=-1, limit=-1
                )
            error = UnavailableError if response.status_code >= 500 else InternalError
            raise error(f"LLM server {self._url} answered {response.status_code}: {text}")
        payload: dict[str, Any] = response.json()
        return payload

    def _fan_out(self, work: Callable[[Prompt], R], batch: list[Prompt]) -> list[R]:
        return list(self._pool.map(work, batch))

    def _score_one(self, prompt: Prompt) -> tuple[tuple[float, float], Usage]:
        payload = self._post(
            {
                "messages": prompt.as_dicts(),
                "max_tokens": 1,
                "logprobs": True,
                "top_logprobs": self.settings.openai_top_logprobs,
            }
        )
        try:
            first = payload["choices"][0]["logprobs"]["content"][0]
            alternatives = [(a["token"], float(a["logprob"])) for a in first["top_logprobs"]]
        except (KeyError, IndexError, TypeError) as exc:
            raise InternalError(f"LLM server returned no logprobs: {str(payload)[:300]}") from exc
        return p_yes_from_top_logprobs(alternatives), _usage(payload)

    def _score_batch(self, batch: list[Prompt]) -> tuple[list[tuple[float, float]], Usage]:
        results = self._fan_out(self._score_one, batch)
        usage = Usage()
        for _, one in results:
            usage += one
        return [value for value, _ in results], usage

    def _generate_batch(
        self, batch: list[Prompt], max_new_tokens: int, grammar: Mapping[str, Any] | None
    ) -> list[Generation]:
        body: dict[str, Any] = {"max_tokens": max_new_tokens}
        if grammar is not None:
            if self.settings.openai_response_format == "json_object":
                body["response_format"] = {"type": "json_object", "schema": dict(grammar)}
            else:
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": "answer", "schema": dict(grammar)},
                }

        def one(prompt: Prompt) -> Generation:
            payload = self._post({**body, "messages": prompt.as_dicts()})
            choice = payload["choices"][0]
            return Generation(
                text=choice["message"].get("content") or "",
                finish_reason=choice.get("finish_reason") or "stop",
                usage=_usage(payload),
            )

        return self._fan_out(one, batch)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def _usage(payload: Mapping[str, Any]) -> Usage:
    usage = payload.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}
    return Usage(
        prompt_tokens=int(usage.get("prompt_tokens", 0)),
        cached_tokens=int(details.get("cached_tokens", 0) or 0),
        completion_tokens=int(usage.get("completion_tokens", 0)),
        calls=1,
    )
