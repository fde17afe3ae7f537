"""One item in, one result out, gathered: the Serve batching every model deployment uses.

Single items that arrive concurrently (the gateway sends each candidate, bulk labelling
each item, as its own call) are gathered by Serve's ``@serve.batch`` into one call of
the domain's batch method, which runs in a worker thread (it is blocking model code) so
the replica's event loop keeps taking calls. The batch size and wait come from the
service's ``DeploymentSettings`` (:func:`size_gathered`), per replica.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from ..core.settings import DeploymentSettings

__all__ = ["gathered", "size_gathered"]

_App = TypeVar("_App")
_Item = TypeVar("_Item")
_Result = TypeVar("_Result")

_GATHERED = "_tribunal_gathered"


def gathered(
    run: Callable[[_App, list[_Item]], Sequence[_Result]],
) -> Callable[[_App, _Item], Coroutine[Any, Any, _Result]]:
    """A deployment method taking one item, from ``run`` (a blocking method taking a
    batch): concurrent calls are gathered into one ``run`` in a worker thread.

    The decorated name must be the attribute's (Serve finds the replica by it).
    """
    from ray import serve

    @functools.wraps(run)
    async def one_batch(app: _App, items: list[_Item]) -> list[_Result]:
        return list(await asyncio.to_thread(run, app, items))

    # Placeholders: size_gathered sets each replica's from its settings.
    batched: Any = serve.batch(max_batch_size=8, batch_wait_timeout_s=0.005)(one_batch)
    setattr(batched, _GATHERED, True)
    return batched  # type: ignore[no-any-return]


def size_gathered(app: object, options: DeploymentSettings) -> None:
    """Set every gathered method of ``app`` to the batch size and wait of ``options``."""
    for klass in type(app).__mro__:
        for name, value in vars(klass).items():
            if getattr(value, _GATHERED, False):
                method: Any = getattr(app, name)
                method.set_max_batch_size(options.max_batch_size)
                method.set_batch_wait_timeout_s(options.batch_wait_timeout_s)
