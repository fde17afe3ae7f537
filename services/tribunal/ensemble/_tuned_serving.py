"""Loading a tuned matcher's model as an embedder the services can share.

The feature matcher embeds queries and entries with it; a collection re-embedded with
it (``tribunal kb reembed --model tuned``) searches with it too, under the name
``tuned:<tm-version>``. Both get this process's one micro-batching embedder of the
model, so a query that retrieval embedded is found in its memory of recent texts by
the matcher: one forward pass per query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..core import TUNED_MODEL_PREFIX, FailedPreconditionError
from ._tuned_artifact import TunedMatcher, tuned_root

if TYPE_CHECKING:
    from ..core import Settings
    from ..embedding import Embedder
    from ..embedding._batching import MicroBatchingEmbedder

__all__ = ["tuned_embedder", "tuned_model_name", "tuned_retrieval_embedder"]


def tuned_model_name(version: str) -> str:
    """The retrieval model name of tune ``version`` (``tuned:tm-…``)."""
    return TUNED_MODEL_PREFIX + version


def tuned_embedder(settings: Settings, tuned: TunedMatcher, name: str) -> MicroBatchingEmbedder:
    """This process's one micro-batching embedder of ``tuned``'s model, named ``name``
    (the head's embedder name, which the feature matcher checks)."""
    from sentence_transformers import SentenceTransformer

    from ..core._loading import MODEL_LOAD_LOCK, resolve_device
    from ..embedding import shared_embedder
    from ..embedding._embedding import SentenceTransformerEmbedder

    options = settings.retrieval

    def load() -> SentenceTransformerEmbedder:
        with MODEL_LOAD_LOCK:
            model = SentenceTransformer(str(tuned.model_dir), device=resolve_device(settings))
        return SentenceTransformerEmbedder(
            model,
            name=name,
            batch_size=options.embed_batch_size,
            batch_tokens=options.embed_batch_tokens,
            traced=options.traced_embedder,
        )

    # Keyed by the directory of a verified version: one model object per tune.
    return shared_embedder(
        settings,
        str(tuned.directory.resolve()),
        load,
        query_model=True,
        collection=tuned.collection,
    )


def tuned_retrieval_embedder(settings: Settings, collection: str, model: str) -> Embedder:
    """The embedder of a collection whose store records ``model`` (``tuned:<version>``):
    that tune of the collection, verified, shared with the feature matcher.

    Raises:
        FailedPreconditionError: not a tuned model name, or that tune is gone, modified
            or bound to another collection.
    """
    from ..embedding import NamedEmbedder
    from ._feature_artifact import MatchFeaturesArtifact

    if not model.startswith(TUNED_MODEL_PREFIX):
        raise FailedPreconditionError(
            f"collection {collection!r} was embedded with {model!r}, which this profile does "
            "not load; re-embed it: `tribunal kb reembed --collection "
            f"{collection} --model profile`",
            field="collection",
        )
    version = model.removeprefix(TUNED_MODEL_PREFIX)
    tuned = TunedMatcher.load(tuned_root(settings.data_dir, collection) / version)
    if tuned.collection != collection or tuned.version != version:
        raise FailedPreconditionError(
            f"{tuned.directory} holds tune {tuned.version} of collection {tuned.collection!r}, "
            f"not {version} of {collection!r}",
            field="collection",
        )
    head = MatchFeaturesArtifact.load(tuned.head_path)
    return NamedEmbedder(tuned_embedder(settings, tuned, head.embedder.name), model)
