"""transformers backend: batched on GPU or CPU; GGUF artifacts converted once and cached.

Loading a GGUF through ``gguf_file=`` dequantises every tensor (≈55 s and 5.6 GB
peak for the 1.5B model), so the first load saves the converted model under
``llm.converted_dir`` (default ``model_dir/converted/<artifact id>``), guarded by a
file lock so concurrent processes convert once; later loads read that folder.

P(yes) with prefix reuse: the prompts of a batch share a token prefix (the
instructions). Its KV cache is computed once (and kept: the next batch recomputes
only what differs), copied to every row, and only the item-specific suffixes run,
left-padded, with an attention mask that hides the pads and position ids that
skip them. Generation runs left-padded batches through ``generate`` (greedy);
it has no grammar constraint, so JSON retries rely on the error feedback.
"""

from __future__ import annotations

import contextlib
import copy
import logging
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from filelock import FileLock

from .._loading import MODEL_LOAD_LOCK
from ..settings import LLMSettings
from ._local import LocalEngine, Tokens, common_prefix_length
from ._types import Generation, Prompt, Usage
from ._yesno import YesNoTokens

if TYPE_CHECKING:
    import torch

__all__ = ["TransformersEngine", "convert_gguf"]

log = logging.getLogger(__name__)


def convert_gguf(gguf_path: Path, target: Path) -> Path:
    """Dequantise ``gguf_path`` into a transformers folder at ``target`` (once; locked).

    Concurrent callers wait on the lock and then find the folder made.
    """
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target.parent / f"{target.name}.lock")):
        if (target / "config.json").is_file():
            return target
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        log.info("converting %s for transformers (once) into %s", gguf_path.name, target)
        partial = target.parent / f".{target.name}.partial-{os.getpid()}"
        shutil.rmtree(partial, ignore_errors=True)
        folder, name = str(gguf_path.parent), gguf_path.name
        with MODEL_LOAD_LOCK, _one_gguf_parse():
            tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
            model = AutoModelForCausalLM.from_pretrained(
                folder, gguf_file=name, dtype=torch.bfloat16
            )
        # The weights are dequantised: a saved GGUF quantisation config would make
        # later loads look for the GGUF again.
        setattr(model, "hf_quantizer", None)  # noqa: B010 - typed as a module attribute
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(partial)
        tokenizer.save_pretrained(partial)
        partial.rename(target)  # atomic: a folder with config.json is always complete
    return target


@contextlib.contextmanager
def _one_gguf_parse() -> Iterator[None]:
    """Within one conversion, every ``gguf.GGUFReader(path)`` returns one reader per path.

    transformers parses the GGUF's header (every metadata field, the tokenizer's 151k
    strings among them) three times for one conversion: for the tokenizer, the model's
    config and the weights; that was about a quarter of the 1.5B model's conversion on
    2 CPU cores. The reader only reads its memory map, so sharing it is safe; another
    thread that opens a GGUF meanwhile (a model probe) gets a reader as well, kept until
    the conversion ends.
    """
    import gguf

    original = gguf.GGUFReader
    readers: dict[tuple[str, str], Any] = {}

    def shared_reader(path: Any, mode: Any = "r") -> Any:
        key = (os.fspath(path), mode)
        if key not in readers:
            readers[key] = original(path, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader  # type: ignore[assignment,misc]
    try:
        yield
    finally:
        gguf.GGUFReader = original  # type: ignore[misc]


class TransformersEngine(LocalEngine):
    """A causal LM run by transformers (PyTorch) in this process."""

    backend = "transformers"

    def __init__(
        self,
        *,
        model_key: str,
        model_name: str,
        source: str | Path,
        device: str,
        settings: LLMSettings,
    ) -> None:
        super().__init__(model_key=model_key, model_name=model_name, settings=settings)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self._torch = torch
        if settings.n_threads is not None:
            torch.set_num_threads(settings.n_threads)
        dtype = (
            _auto_dtype(torch, device)
            if settings.torch_dtype == "auto"
            else getattr(torch, settings.torch_dtype)
        )
        local = isinstance(source, Path)
        with MODEL_LOAD_LOCK:
            self._tokenizer = AutoTokenizer.from_pretrained(str(source), local_files_only=local)
            model: Any = AutoModelForCausalLM.from_pretrained(
                str(source), dtype=dtype, local_files_only=local
            )
            self._model = model.to(device)
        self._model.eval()
        self._device = device
        if not self._tokenizer.chat_template:
            raise ValueError(f"{model_name} has no chat template")
        pad = self._tokenizer.pad_token_id
        self._pad_id = int(pad if pad is not None else self._tokenizer.eos_token_id)
        eos = self._model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        eos_ids.add(int(self._tokenizer.eos_token_id))
        self._eos_ids = sorted(eos_ids)
        self.yes_no = YesNoTokens.from_tokenizer(
            lambda text: self._tokenizer.encode(text, add_special_tokens=False)
        )
        self._prefix_tokens: Tokens = ()
        self._prefix_cache: Any = None

    def _prepare(self, prompt: Prompt) -> Tokens:
        text = self._tokenizer.apply_chat_template(
            prompt.as_dicts(), add_generation_prompt=True, tokenize=False
        )
        # The template already wrote the special tokens it wants.
        return tuple(self._tokenizer.encode(text, add_special_tokens=False))

    def _run_on_kept_cache(self, tokens: Tokens, limit: int) -> tuple[int, Any]:
        """Feed ``tokens`` through the kept KV cache, reusing what it shares with them.

        The cache first loses whatever follows the shared prefix (at most ``limit``
        tokens are kept), then takes the rest of ``tokens``; returns the number of tokens
        reused and the model output of the last forward (None when nothing ran).
        """
        from transformers import DynamicCache

        keep = min(common_prefix_length(self._prefix_tokens, tokens), limit)
        if self._prefix_cache is None or keep == 0:
            self._prefix_cache, keep = DynamicCache(), 0
        elif keep < len(self._prefix_tokens):
            self._prefix_cache.crop(-(len(self._prefix_tokens) - keep))
        self._prefix_tokens = tokens[:keep]
        out = None
        if keep < len(tokens):
            ids = self._torch.tensor([tokens[keep:]], device=self._device)
            out = self._model(
                input_ids=ids, cache=self._prefix_cache, use_cache=True, logits_to_keep=1
            )
            self._prefix_tokens = tokens
        return keep, out

    def _last_logits(self, batch: list[Tokens]) -> tuple[npt.NDArray[np.float32], Usage]:
        torch = self._torch
        rows = len(batch)
        total = sum(map(len, batch))
        if not self.settings.prefix_cache:
            with torch.inference_mode():
                ids, mask = self._left_padded(batch, 0)
                positions = (mask.cumsum(-1) - 1).clamp(min=0)
                out = self._model(
                    input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=1
                )
                return out.logits[:, -1, :].float().cpu().numpy(), Usage(prompt_tokens=total)
        if rows == 1:
            # One prompt: a single forward over what the kept cache lacks, like llama.cpp.
            with torch.inference_mode():
                keep, out = self._run_on_kept_cache(batch[0], len(batch[0]) - 1)
                logits = out.logits[:, -1, :].float().cpu().numpy()
            return logits, Usage(prompt_tokens=total, cached_tokens=keep)
        shared = min(len(t) for t in batch) - 1
        for tokens in batch[1:]:
            shared = min(shared, common_prefix_length(batch[0], tokens))
        with torch.inference_mode():
            keep, _ = self._run_on_kept_cache(batch[0][:shared], shared)
            cache = None
            if shared > 0:
                # The shared prefix runs once; every row continues from a copy of it.
                cache = copy.deepcopy(self._prefix_cache)
                cache.batch_repeat_interleave(rows)
            ids, mask = self._left_padded([t[shared:] for t in batch], shared)
            positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, shared:]
            out = self._model(
                input_ids=ids,
                attention_mask=mask,
                position_ids=positions,
                cache=cache,
                use_cache=cache is not None,
                logits_to_keep=1,
            )
            logits = out.logits[:, -1, :].float().cpu().numpy()
        computed = (shared - keep) + sum(len(t) - shared for t in batch)
        return logits, Usage(prompt_tokens=total, cached_tokens=total - computed)

    def _left_padded(
        self, suffixes: list[Tokens], prefix_length: int
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Token ids (rows, width) padded on the left, and the mask over prefix + width."""
        torch = self._torch
        width = max(map(len, suffixes))
        ids = torch.full((len(suffixes), width), self._pad_id, dtype=torch.long)
        mask = torch.zeros((len(suffixes), prefix_length + width), dtype=torch.long)
        mask[:, :prefix_length] = 1
        for row, tokens in enumerate(suffixes):
            ids[row, width - len(tokens) :] = torch.tensor(tokens, dtype=torch.long)
            mask[row, prefix_length + width - len(tokens) :] = 1
        return ids.to(self._device), mask.to(self._device)

    def _generate_batch(
        self, batch: list[Tokens], max_new_tokens: int, grammar: Mapping[str, Any] | None
    ) -> list[Generation]:
        ids, mask = self._left_padded(batch, 0)
        with self._torch.inference_mode():
            output = self._model.generate(
                input_ids=ids,
                attention_mask=mask,
                max_new_tokens=max_new_tokens,
                do_sample=False,
                temperature=None,
                top_p=None,
                top_k=None,
                pad_token_id=self._pad_id,
                eos_token_id=self._eos_ids,
            )
        out: list[Generation] = []
        for row, prompt in enumerate(batch):
            new = output[row, ids.shape[1] :].tolist()
            ended = next((i for i, t in enumerate(new) if t in self._eos_ids), None)
            kept = new if ended is None else new[:ended]
            out.append(
                Generation(
                    text=str(self._tokenizer.decode(kept, skip_special_tokens=True)),
                    finish_reason="length" if ended is None else "stop",
                    usage=Usage(
                        prompt_tokens=len(prompt),
                        completion_tokens=len(kept) + (ended is not None),
                        calls=1,
                    ),
                )
            )
        return out


def _auto_dtype(torch: Any, device: str) -> Any:
    """bfloat16 where the hardware computes in it (a GPU, or a CPU with native bfloat16
    instructions), else float32: a CPU without them (AVX2 only) emulates bfloat16 matrix
    products at about a third of float32's speed."""
    if not str(device).startswith("cpu"):
        return torch.bfloat16
    try:
        native = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):  # a torch build without the check
        native = False
    return torch.bfloat16 if native else torch.float32
