"""Which model searches a collection: the one its store records.

A collection's vectors come from one model, named in its store: the profile's
embedder (every new collection), or the collection's tuned matcher model
(``tuned:<tm-version>``) once ``tribunal kb reembed --model tuned`` re-embedded it.
Retrieval embeds a query with the model of the collection it searches; where that is
the feature matcher's model too, the matcher finds the query's vector in the shared
embedder's memory of recent texts, so the query costs one forward pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..core import FailedPreconditionError
from ..embedding import Embedder

if TYPE_CHECKING:
    from ..core import Settings

__all__ = ["RetrievalModels"]

ModelLoader = Callable[[str, str], Embedder]
"""(collection, recorded model name) → that model's embedder."""


class RetrievalModels:
    """The embedders collections are searched with, by the model name their store records.

    Args:
        profile: The profile's embedder: new collections and those recorded with its name.
        profile_version: What searches report as the profile embedder's model
            (``<artifact>@<12 hex of its sha256>``, as calibrations record it); empty:
            its name.
        load: Loads another recorded model for a collection; None: only the profile's
            model can be served (a collection recorded with another fails to open).
    """

    def __init__(
        self, profile: Embedder, *, profile_version: str = "", load: ModelLoader | None = None
    ) -> None:
        self.profile = profile
        self.profile_version = profile_version or profile.name
        self._load = load

    @classmethod
    def from_settings(cls, settings: Settings) -> RetrievalModels:
        """The profile's shared embedder, and tuned models loaded from ``data_dir/tuned``."""
        from ..core import embedder_version
        from ..embedding import shared_profile_embedder

        def load(collection: str, model: str) -> Embedder:
            from ..ensemble import tuned_retrieval_embedder

            return tuned_retrieval_embedder(settings, collection, model)

        return cls(
            shared_profile_embedder(settings),
            profile_version=embedder_version(settings),
            load=load,
        )

    def for_collection(self, collection: str, recorded: str | None) -> Embedder:
        """The embedder of a collection whose store records ``recorded`` (None: new).

        Raises:
            FailedPreconditionError: a model this service cannot load.
        """
        if recorded is None or recorded == self.profile.name:
            return self.profile
        if self._load is None:
            raise FailedPreconditionError(
                f"collection {collection!r} was embedded with {recorded!r}, not this "
                f"service's {self.profile.name!r}; re-embed it: `tribunal kb reembed "
                f"--collection {collection} --model profile`",
                field="collection",
            )
        return self._load(collection, recorded)

    def reported(self, embedder: Embedder) -> str:
        """The model name searches report (and calibrations are bound to)."""
        return self.profile_version if embedder.name == self.profile.name else embedder.name
