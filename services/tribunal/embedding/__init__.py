"""Text embedding models shared by the services: one embedder per model per process.

Framework-free: nothing here imports grpc or ray. Retrieval indexes and searches with
these embedders; the ensemble's matchers and the relevance judge score with them.

Typical use::

    embedder = shared_profile_embedder(load_settings("tiny"))
    vectors = embedder.embed(["how does the virus spread?"])

:func:`shared_profile_embedder` gathers concurrent calls into one forward pass
(:class:`MicroBatchingEmbedder`); :class:`VectorStore` keeps vectors of long texts on
disk across processes.
"""

from ._batching import prefetch_query_vectors, shared_embedder, shared_profile_embedder
from ._embedding import (
    CachingEmbedder,
    Embedder,
    NamedEmbedder,
    load_profile_embedder,
    profile_embedder_name,
)
from ._vector_store import VectorStore

__all__ = [
    "CachingEmbedder",
    "Embedder",
    "NamedEmbedder",
    "VectorStore",
    "load_profile_embedder",
    "prefetch_query_vectors",
    "profile_embedder_name",
    "shared_embedder",
    "shared_profile_embedder",
]
