"""Loading a tuned matcher's model as an embedder the services can share."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from ._tuned_artifact import TunedMatcher

if TYPE_CHECKING:
    from ..core import Settings
    from ..embedding._batching import MicroBatchingEmbedder

__all__ = ["tuned_embedder"]

_LOADED: dict[str, MicroBatchingEmbedder] = {}
_LOCK = threading.Lock()


def tuned_embedder(settings: Settings, tuned: TunedMatcher, name: str) -> MicroBatchingEmbedder:
    """This process's one micro-batching embedder of ``tuned``'s model (by version), named
    ``name`` (the head's embedder name, which the feature matcher checks)."""
    from sentence_transformers import SentenceTransformer

    from ..core._loading import MODEL_LOAD_LOCK, resolve_device
    from ..embedding._batching import MicroBatchingEmbedder
    from ..embedding._embedding import SentenceTransformerEmbedder

    options = settings.retrieval
    with _LOCK:
        found = _LOADED.get(tuned.version)
        if found is None:
            with MODEL_LOAD_LOCK:
                model = SentenceTransformer(str(tuned.model_dir), device=resolve_device(settings))
            found = MicroBatchingEmbedder(
                SentenceTransformerEmbedder(
                    model,
                    name=name,
                    batch_size=options.embed_batch_size,
                    batch_tokens=options.embed_batch_tokens,
                ),
                max_batch_texts=options.micro_batch_texts,
                max_wait_s=options.micro_batch_wait_s,
            )
            _LOADED[tuned.version] = found
        return found
