"""Text → unit-length float32 vectors, in batches."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from ._vectors import Vectors

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

    from ..core import Settings
    from ._vector_store import VectorStore

__all__ = [
    "CachingEmbedder",
    "Embedder",
    "NamedEmbedder",
    "SentenceTransformerEmbedder",
    "WrappingEmbedder",
    "load_profile_embedder",
    "profile_embedder_name",
]


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
    """A sentence-transformers model, batched by length, normalised.

    Texts are sorted by token count and cut into forward passes of similar lengths, each
    of at most ``batch_size`` texts and ``batch_tokens`` padded tokens: a pass of long
    passages pads little and stays small, a pass of short queries takes many
    (``bench/label.py`` measures a job against this embedder's throughput).

    Args:
        model: The loaded model (see :func:`tribunal.core.load_embedder`).
        name: Model id to record with collections.
        batch_size: Most texts per forward pass.
        batch_tokens: Most padded tokens per forward pass (a longer text runs alone).
        traced: Run the transformer as one TorchScript call per pass (see
            :mod:`._traced`); checked against ``encode`` at load, which stays in use for
            a model that cannot be traced.
    """

    def __init__(
        self,
        model: SentenceTransformer,
        *,
        name: str,
        batch_size: int = 32,
        batch_tokens: int = 512,
        traced: bool = False,
    ) -> None:
        from ._traced import trace_encoder

        self.model = model
        self._name = name
        self.batch_size = batch_size
        self.batch_tokens = batch_tokens
        # A fast tokenizer's padding settings are changed by each call: two passes at
        # once (one per core) tokenise one at a time.
        self._tokenizing = threading.Lock()
        self.traced_ = trace_encoder(model, self._tokenizing) if traced else None
        """The traced pass in use (None: the model's own ``encode``)."""
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

    def _passes(self, texts: Sequence[str]) -> list[list[int]]:
        """Indices of ``texts`` per forward pass, shortest texts first."""
        limit = self.model.max_seq_length or 512
        with self._tokenizing:
            tokenized = self.model.tokenizer(list(texts), add_special_tokens=True)
        lengths = [min(len(ids), limit) for ids in tokenized["input_ids"]]
        order = sorted(range(len(texts)), key=lengths.__getitem__)
        passes: list[list[int]] = []
        current: list[int] = []
        for index in order:
            # Sorted ascending: this text is the longest of the pass so far.
            if current and (
                len(current) >= self.batch_size
                or (len(current) + 1) * lengths[index] > self.batch_tokens
            ):
                passes.append(current)
                current = []
            current.append(index)
        if current:
            passes.append(current)
        return passes

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> Vectors:
        out = np.empty((len(texts), self._dimension), dtype=np.float32)
        if not texts:
            return out
        bar = None
        if progress:
            from tqdm import tqdm

            bar = tqdm(total=len(texts), desc="embedding", unit="text")
        try:
            for indices in self._passes(texts):
                batch = [texts[i] for i in indices]
                out[indices] = (
                    self.traced_(batch) if self.traced_ is not None else self._encode(batch)
                )
                if bar is not None:
                    bar.update(len(indices))
        finally:
            if bar is not None:
                bar.close()
        return out

    def _encode(self, batch: list[str]) -> Vectors:
        """The model's own ``encode`` (a model that could not be traced): it tokenises
        inside, so the whole pass holds the tokenizer."""
        with self._tokenizing:
            vectors: Vectors = self.model.encode(
                batch,
                batch_size=len(batch),
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return vectors


class WrappingEmbedder:
    """Base of embedders that add something around another one: its name and dimension
    are the inner embedder's."""

    inner: Embedder

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dimension(self) -> int:
        return self.inner.dimension


class NamedEmbedder(WrappingEmbedder):
    """Another embedder's model under the name a collection records: one model object
    (one queue of forward passes, one memory of recent texts) serves under both."""

    def __init__(self, inner: Embedder, name: str) -> None:
        self.inner = inner
        self._name = name

    @property
    def name(self) -> str:
        return self._name

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> Vectors:
        return self.inner.embed(texts, progress=progress)


class CachingEmbedder(WrappingEmbedder):
    """An embedder that remembers the vectors of the last ``max_texts`` distinct texts.

    For callers that embed the same texts again and again — the feature matcher embeds a
    KB entry's question and answer with every query — so only new texts reach the model.
    Least recently used texts are dropped first; safe to share between threads.

    Args:
        inner: The embedder that computes missing vectors.
        max_texts: Most vectors kept in memory (10,000 768-d vectors: ~31 MB).
        store: Where vectors also go, and are looked for before the model runs: kept
            across restarts and shared with other processes on the same data directory
            (:class:`~tribunal.embedding.VectorStore`); None: memory only.
    """

    def __init__(
        self, inner: Embedder, *, max_texts: int = 10_000, store: VectorStore | None = None
    ) -> None:
        if max_texts < 1:
            raise ValueError("max_texts must be >= 1")
        self.inner = inner
        self.max_texts = max_texts
        self.store = store
        self._vectors: OrderedDict[str, Vectors] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str], *, progress: bool = False) -> Vectors:
        # The model runs outside the lock, so that concurrent misses can reach a
        # micro-batching inner embedder together; vectors read under the lock are copied
        # out before an eviction could drop them.
        with self._lock:
            known = {t: self._vectors[t] for t in texts if t in self._vectors}
            for text in known:
                self._vectors.move_to_end(text)
        missing = list(dict.fromkeys(t for t in texts if t not in known))
        if missing and self.store is not None:
            known.update(self.store.get(missing))
            computed = [t for t in missing if t not in known]
        else:
            computed = missing
        if computed:
            fresh = self.inner.embed(computed, progress=progress)
            known.update(zip(computed, fresh, strict=True))
            if self.store is not None:
                self.store.put(computed, fresh)
        if missing:
            with self._lock:
                for text in missing:
                    self._vectors[text] = known[text]
                while len(self._vectors) > self.max_texts:
                    self._vectors.popitem(last=False)
        out = np.empty((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = known[text]
        return out


def profile_embedder_name(settings: Settings, key: str | None = None) -> str:
    """The name collections record for embedder model ``key`` of the profile (default:
    the embedder role)."""
    if key is None:
        assert settings.roles is not None, "the profile defines no roles"
        key = settings.roles.embedder
    spec = settings.model_spec(key)
    return spec.artifact or spec.hf_id or key


def load_profile_embedder(
    settings: Settings, key: str | None = None
) -> SentenceTransformerEmbedder:
    """Embedder model ``key`` of the profile (default: the embedder role), loaded from the
    model cache."""
    from ..core import load_embedder

    if key is None:
        assert settings.roles is not None, "the profile defines no roles"
        key = settings.roles.embedder
    return SentenceTransformerEmbedder(
        load_embedder(settings, key),
        name=profile_embedder_name(settings, key),
        batch_size=settings.retrieval.embed_batch_size,
        batch_tokens=settings.retrieval.embed_batch_tokens,
        traced=settings.retrieval.traced_embedder,
    )
