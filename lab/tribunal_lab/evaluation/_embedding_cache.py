"""Resumable per-text embedding caches: each text is embedded once per (model, prompt).

Vectors are kept in ``cache_dir("embeddings")/<model_key>[-<prompt>]/`` as numbered
``.npz`` blocks (text sha256 → unit vector), written as they are computed, so a run
stopped half-way resumes from the blocks already written. ``prompt`` None embeds the
texts as the product's embedder does (no prompt: the served relevance judge's cosine);
a prompt name (``query``, ``document``) uses the sentence-transformers model's own
prompt of that name (EmbeddingGemma's retrieval prompts).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from .._paths import cache_dir

__all__ = ["EmbeddingCache", "text_key"]

_BLOCK = 128


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EmbeddingCache:
    """The vectors of one (model key, prompt) pair, loaded from and added to disk."""

    def __init__(self, model_key: str, prompt: str | None = None, root: Path | None = None) -> None:
        self.model_key = model_key
        self.prompt = prompt
        name = model_key if prompt is None else f"{model_key}-{prompt}"
        self.folder = (root or cache_dir("embeddings")) / name
        self.vectors: dict[str, NDArray[np.float32]] = {}
        for block in sorted(self.folder.glob("block-*.npz")):
            with np.load(block) as data:
                for key, vector in zip(data["keys"], data["vectors"], strict=True):
                    self.vectors[str(key)] = vector

    def missing(self, texts: Sequence[str]) -> list[str]:
        return list(dict.fromkeys(t for t in texts if text_key(t) not in self.vectors))

    def fill(self, texts: Sequence[str], settings: Any, *, progress: bool = True) -> None:
        """Embed every text not cached yet with the profile's model, block by block."""
        todo = self.missing(texts)
        if not todo:
            return
        from tribunal.core import load_embedder

        model = load_embedder(settings, self.model_key)
        self.folder.mkdir(parents=True, exist_ok=True)
        done = len(list(self.folder.glob("block-*.npz")))
        options: dict[str, Any] = {} if self.prompt is None else {"prompt_name": self.prompt}
        for start in range(0, len(todo), _BLOCK):
            block = todo[start : start + _BLOCK]
            vectors = model.encode(
                block,
                batch_size=16,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
                **options,
            ).astype(np.float32)
            keys = np.array([text_key(t) for t in block])
            np.savez(self.folder / f"block-{done:05d}.npz", keys=keys, vectors=vectors)
            done += 1
            for key, vector in zip(keys, vectors, strict=True):
                self.vectors[str(key)] = vector
            if progress:
                print(
                    f"  {self.folder.name}: {min(start + _BLOCK, len(todo))}/{len(todo)} embedded",
                    flush=True,
                )

    def matrix(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """Rows in ``texts`` order (every text must be cached)."""
        return np.stack([self.vectors[text_key(t)] for t in texts])
