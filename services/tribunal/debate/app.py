"""The debate service as a Ray Serve application.

One deployment wraps the domain :class:`DreamDebate`. Single items that arrive
concurrently (bulk labelling sends one item per call) are gathered by
``@serve.batch`` into one ``assess_many``, so every round of the gathered items is
one batched engine call. Serve's gRPC proxy calls the proto-named methods, which
translate with the plain servicer's functions.

    serve.run(build_app(load_settings()), name="debate")
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

from ray import serve
from ray.serve import Application

from ..core import Settings
from ..deploy import ServeApp, gathered, size_gathered
from ..v1 import debate_pb2
from ._debate import DreamDebate
from ._factory import build_debate
from ._types import DebateItem, DebateResult
from .servicer import batch_item_response, item_from_proto, result_to_proto

__all__ = ["DebateDeployment", "build_app"]


@serve.deployment(name="debate")
class DebateDeployment(ServeApp, service="debate"):
    """A replica: the profile's debate, with concurrent single items batched."""

    def __init__(self, settings_data: dict[str, Any]) -> None:
        settings = Settings(**settings_data)
        super().__init__(settings)
        self.profile = settings.profile
        self.debate: DreamDebate = build_debate(settings)
        size_gathered(self, settings.debate.deployment)

    @gathered
    def assess_one(self, items: list[DebateItem]) -> list[DebateResult]:
        """One item in, one result out; Serve gathers concurrent calls into one debate batch."""
        return self.debate.assess_many(items)

    async def assess(self, item: DebateItem) -> DebateResult:
        # Reject bad input here, alone: inside a gathered batch it would fail the others.
        self.debate.validate([item])
        return await self.assess_one(item)

    async def assess_many(self, items: list[DebateItem]) -> list[DebateResult]:
        """A caller's own batch runs as it is (already a batch)."""
        return await asyncio.to_thread(self.debate.assess_many, items)

    async def Assess(
        self, request: debate_pb2.AssessRequest, grpc_context: Any = None
    ) -> debate_pb2.AssessResponse:
        return result_to_proto(await self.assess(item_from_proto(request)), self.profile)

    async def BatchAssess(
        self, request: debate_pb2.BatchAssessRequest, grpc_context: Any = None
    ) -> AsyncIterator[debate_pb2.BatchAssessResponse]:
        items = [item_from_proto(one) for one in request.items]
        self.debate.validate(items)
        # The domain's generator runs in a thread; each finished item crosses over as it ends.
        loop = asyncio.get_running_loop()
        finished: asyncio.Queue[tuple[int, DebateResult] | None] = asyncio.Queue()

        def produce() -> None:
            try:
                for pair in self.debate.stream(items):
                    loop.call_soon_threadsafe(finished.put_nowait, pair)
            finally:
                loop.call_soon_threadsafe(finished.put_nowait, None)

        producer = asyncio.ensure_future(asyncio.to_thread(produce))
        while (pair := await finished.get()) is not None:
            yield batch_item_response(*pair, self.profile)
        await producer  # re-raises what stopped the debate


def build_app(settings: Settings) -> Application:
    """The debate application, scaled like the other model services."""
    deployment = cast(Any, DebateDeployment).options(**settings.debate.deployment.ray_options())
    app: Application = deployment.bind(settings.model_dump(mode="json"))
    return app
