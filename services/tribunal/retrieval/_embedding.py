"""Text → unit-length float32 vectors, in batches."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from ..core import Settings

__all__ = ["CachingEmbedder", "Embedder", "SentenceTransformerEmbedder", "load_profile_embedder"]

Vectors = NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """What the retrieval service needs from an embedding model."""

    @property
    def name(self) -> str:
        """Model id, recorded with every collection (vectors of two models never mix)."""
        ...

    @property
    def dimension(self) -> int:
        """Vector length."""
        ...

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> Vectors:
        """``(len(texts), dimension)`` float32 rows of unit L2 norm."""
        ...


class SentenceTransformerEmbedder:
    """A sentence-transformers model, batched, normalised.

    Args:
        model: The loaded model (see :func:`tribunal.core.load_embedder`).
        name: Model id to record with collections.
        batch_size: Texts per forward pass.
    """

    # Texts handed to one encode() call: large enough for its length-sorting to
    # pay off, small enough that the progress bar moves.
    _BLOCK = 512

    def __init__(self, model: SentenceTransformer, *, name: str, batch_size: int = 32) -> None:
        self.model = model
        self._name = name
        self.batch_size = batch_size
        dimension = model.get_embedding_dimension()
        if dimension is None:  # pragma: no cover - every sentence-transformers embedder has one
            raise ValueError("the embedder does not report its dimension")
        self._dimension = int(dimension)

    @property
    def name(self) -> str:
        return self._name

    @property
    def dimension(self) -> int:
        return self._dimension

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> Vectors:
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(texts), desc="embedding", unit="text")
        try:
            for start in range(0, len(texts), self._BLOCK):
                block = list(texts[start : start + self._BLOCK])
                out[start : start + len(block)] = self.model.encode(
                    block,
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
                if bar is not None:
                    bar.update(len(block))
        finally:
            if bar is not None:
                bar.close()
        return out


class CachingEmbedder:
    """An embedder that remembers the vectors of the last ``max_texts`` distinct texts.

    For callers that embed the same texts again and again — the feature matcher embeds a
    KB entry's question and answer with every query — so only new texts reach the model.
    Least recently used texts are dropped first; safe to share between threads.

    Args:
        inner: The embedder that computes missing vectors.
        max_texts: Most vectors kept (10,000 768-d vectors: ~31 MB).
    """

    def __init__(self, inner: Embedder, *, max_texts: int = 10_000) -> None:
        if max_texts < 1:
            raise ValueError("max_texts must be >= 1")
        self.inner = inner
        self.max_texts = max_texts
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> Vectors:
        # One lock over lookup, model call and update: a text found here cannot be
        # evicted by another thread before it is read (the model runs one call at a
        # time on these CPUs anyway).
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
            if missing:
                fresh = self.inner.embed(missing, progress=progress)
                for text, vector in zip(missing, fresh, strict=True):
                    self._vectors[text] = vector
            out = np.empty((len(texts), self.dimension), dtype=np.float32)
            for row, text in enumerate(texts):
                out[row] = self._vectors[text]
                self._vectors.move_to_end(text)
            while len(self._vectors) > self.max_texts:
                self._vectors.popitem(last=False)
        return out


def load_profile_embedder(
    settings: Settings, key: str | None = None
) -> SentenceTransformerEmbedder:
    """Embedder model ``key`` of the profile (default: the embedder role), loaded from the
    model cache."""
    from ..core import load_embedder

    if key is None:
        assert settings.roles is not None, "the profile defines no roles"
        key = settings.roles.embedder
    spec = settings.model_spec(key)
    return SentenceTransformerEmbedder(
        load_embedder(settings, key),
        name=spec.artifact or spec.hf_id or key,
        batch_size=settings.retrieval.embed_batch_size,
    )
