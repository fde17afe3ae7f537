"""llama.cpp backend (llama-cpp-python, optional extra ``llamacpp``): the fast CPU path.

P(yes): evaluate the prompt tokens, then read the last logits row with
``llama_get_logits_ith(ctx, -1)`` (``Llama.scores`` stays empty without
``logits_all``). The context keeps the KV cache of the previous prompt; each new
prompt evaluates only the tokens after the prefix it shares with it, the way
``Llama.generate`` does for completions. There is one sequence, so a batch runs
its prompts one after the other (sorted so that shared prefixes are adjacent).
"""

from __future__ import annotations

import contextlib
import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from .._errors import ConfigError, FailedPreconditionError
from ..settings import LLMSettings
from ._local import LocalEngine, Tokens, common_prefix_length
from ._types import Generation, Prompt, Usage
from ._yesno import YesNoTokens

__all__ = ["LlamaCppEngine"]


class LlamaCppEngine(LocalEngine):
    """A GGUF model run by llama.cpp in this process."""

    backend = "llamacpp"

    def __init__(
        self, *, model_key: str, model_name: str, gguf_path: Path, settings: LLMSettings
    ) -> None:
        super().__init__(model_key=model_key, model_name=model_name, settings=settings)
        try:
            import llama_cpp
            from llama_cpp import llama_chat_format, llama_grammar
        except ImportError as exc:
            raise FailedPreconditionError(
                "the llamacpp backend needs llama-cpp-python, an extra: `make llm` builds it for "
                "this CPU (once, ~10 min; or pip install -e '.[llamacpp]' with the Makefile's "
                "CMAKE_ARGS), or set llm_backend: transformers"
            ) from exc
        self._lib = llama_cpp
        self._grammar = llama_grammar.LlamaGrammar
        n_ctx = settings.max_prompt_tokens + settings.max_new_tokens
        # llama.cpp prints its load log on stderr; keep it out of service logs.
        with contextlib.redirect_stderr(io.StringIO()):
            self._llm = llama_cpp.Llama(
                model_path=str(gguf_path),
                n_ctx=n_ctx,
                n_batch=512,
                n_threads=settings.n_threads,
                n_threads_batch=settings.n_threads,
                logits_all=False,
                seed=0,
                verbose=False,
            )
        metadata = self._llm.metadata
        trained = int(metadata.get(f"{metadata.get('general.architecture')}.context_length", 0))
        if trained and n_ctx > trained:
            raise ConfigError(
                f"llm.max_prompt_tokens + llm.max_new_tokens = {n_ctx} exceeds the "
                f"{trained}-token context {model_name} was trained for",
                field="llm.max_prompt_tokens",
            )
        template = metadata.get("tokenizer.chat_template")
        if not template:
            raise FailedPreconditionError(f"{gguf_path.name} carries no chat template")
        eos_id, bos_id = self._llm.token_eos(), self._llm.token_bos()
        model = self._llm._model
        self._formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=model.token_get_text(eos_id) if eos_id != -1 else "",
            bos_token=model.token_get_text(bos_id) if bos_id != -1 else "",
            add_generation_prompt=True,
        )
        self._n_vocab = self._llm.n_vocab()
        self.yes_no = YesNoTokens.from_tokenizer(
            lambda text: self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        )

    def _prepare(self, prompt: Prompt) -> Tokens:
        rendered = self._formatter(messages=prompt.as_dicts())  # type: ignore[arg-type]
        # The template writes the BOS token itself when the model has one.
        return tuple(
            self._llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=False, special=True)
        )

    def _reusable(self, tokens: Tokens) -> int:
        """Tokens of the KV cache to keep: the shared prefix, leaving at least one to evaluate."""
        if not self.settings.prefix_cache:
            return 0
        cached = self._llm.input_ids[: self._llm.n_tokens].tolist()
        return min(common_prefix_length(cached, tokens), len(tokens) - 1)

    def _last_logits(self, batch: list[Tokens]) -> tuple[npt.NDArray[np.float32], Usage]:
        rows = np.empty((len(batch), self._n_vocab), dtype=np.float32)
        reused = 0
        for index, tokens in enumerate(batch):
            keep = self._reusable(tokens)
            # eval() drops the KV cache after n_tokens before it appends.
            self._llm.n_tokens = keep
            self._llm.eval(tokens[keep:])
            pointer = self._lib.llama_get_logits_ith(self._llm.ctx, -1)
            rows[index] = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,))
            reused += keep
        return rows, Usage(prompt_tokens=sum(map(len, batch)), cached_tokens=reused)

    def _generate_batch(
        self, batch: list[Tokens], max_new_tokens: int, grammar: Mapping[str, Any] | None
    ) -> list[Generation]:
        constraint = None
        if grammar is not None:
            with contextlib.redirect_stderr(io.StringIO()):
                constraint = self._grammar.from_json_schema(json.dumps(grammar), verbose=False)
        out: list[Generation] = []
        for tokens in batch:
            keep = self._reusable(tokens)
            if keep == 0:
                self._llm.reset()  # type: ignore[no-untyped-call]
            completion: Any = self._llm.create_completion(
                prompt=list(tokens),
                max_tokens=max_new_tokens,
                temperature=0.0,
                stop=[],
                grammar=constraint,
            )
            choice = completion["choices"][0]
            usage = completion["usage"]
            out.append(
                Generation(
                    text=choice["text"],
                    finish_reason=choice.get("finish_reason") or "stop",
                    usage=Usage(
                        prompt_tokens=usage["prompt_tokens"],
                        cached_tokens=keep,
                        completion_tokens=usage["completion_tokens"],
                        calls=1,
                    ),
                )
            )
        return out

    def close(self) -> None:
        self._llm.close()
