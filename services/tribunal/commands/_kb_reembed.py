"""``tribunal kb reembed``: search a collection with another model.

``--model tuned`` re-embeds every search unit with the collection's current tune
(``tribunal tune``), so retrieval and the feature matcher share one model and a query
costs one forward pass; ``--model profile`` goes back to the profile's embedder. The
entries, their verifications and signatures stay (the content version does not
change), but the candidates do: a calibrator certified under the other model falls
back until ``tribunal calibrate`` certifies one under this one.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core import Settings
    from ..retrieval import KnowledgeBase

__all__ = ["reembed_collection", "register_reembed", "retrieval_model_name"]


def register_reembed(actions: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    reembed = actions.add_parser(
        "reembed",
        help="search a collection with its tuned model (one model pass per query) or the "
        "profile's embedder",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    reembed.add_argument("--collection", required=True, help="the collection to re-embed")
    reembed.add_argument(
        "--model",
        choices=("tuned", "profile"),
        required=True,
        help="tuned: the collection's current tune; profile: the profile's embedder",
    )
    reembed.add_argument("--profile", default=None, help="profile name or YAML path")
    reembed.set_defaults(func=_reembed)


def retrieval_model_name(settings: Settings, kb: KnowledgeBase, collection: str, model: str) -> str:
    """The name a store records for ``model`` (``tuned`` or ``profile``) of ``collection``.

    Raises:
        FailedPreconditionError: ``tuned`` with no tune of the collection.
    """
    from ..core import FailedPreconditionError
    from ..ensemble import TunedMatcher, current_tuned_dir, tuned_model_name

    if model == "profile":
        return kb.models.profile.name
    directory = current_tuned_dir(settings.data_dir, collection)
    if directory is None:
        raise FailedPreconditionError(
            f"collection {collection!r} has no tune; run `tribunal tune --collection "
            f"{collection} --traffic LABELLED.jsonl` first",
            field="collection",
        )
    return tuned_model_name(TunedMatcher.load(directory).version)


def reembed_collection(settings: Settings, collection: str, model: str) -> None:
    """Re-embed ``collection`` with ``model`` (``tuned`` or ``profile``), audited under the
    local user's name, saying what it did and what to do next."""
    from ..retrieval import AuditedWrites, KnowledgeBase
    from ..retrieval.servicer import open_change_log
    from ._actors import cli_actor

    kb = KnowledgeBase.from_settings(settings, checker=None)
    try:
        name = retrieval_model_name(settings, kb, collection, model)
        before = kb.models.reported(kb.embedder_of(collection))
        print(f"re-embedding collection {collection!r}: {before} -> {name}", file=sys.stderr)
        started = time.perf_counter()
        units = AuditedWrites(kb, open_change_log(settings)).reembed(
            cli_actor(), collection, name, progress=True
        )
        after = kb.models.reported(kb.embedder_of(collection))
    finally:
        kb.close()
    print(
        f"collection {collection!r} now searched with {after}: {units} units re-embedded "
        f"in {time.perf_counter() - started:.1f} s. A calibrator certified under {before} "
        f"no longer applies: `tribunal calibrate --collection {collection} --traffic "
        "LABELLED.jsonl`"
    )


def _reembed(args: argparse.Namespace) -> int:
    from ..core import load_settings

    reembed_collection(load_settings(args.profile), args.collection, args.model)
    return 0
