"""The ensemble service as a Ray Serve application.

One deployment wraps the domain matcher (:func:`load_matcher`: the LLM judge panel or
the feature matcher; not loaded with ``serve_match=False``) and the relevance judge
(:class:`RelevanceJudgeSlot`: loaded on the first ``JudgeRelevance``, or at start
with ``preload_relevance=True``). Single pairs that arrive concurrently (the gateway matches
each candidate, and labels each item, as its own call) are gathered by
``@serve.batch`` into one matcher (or judge) call, so each judge model sees one batch and the
models run in parallel threads. Serve's gRPC proxy calls the proto-named methods.

    serve.run(build_app(load_settings()), name="ensemble")
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from ray import serve
from ray.serve import Application

from ..core import Settings
from ..deploy import ServeApp, gathered, size_gathered
from ..v1 import ensemble_pb2
from ._feature_matcher import Matcher, load_matcher
from ._matcher import MatchRequestItem, MatchResult
from ._relevance import RelevanceItem, RelevanceJudgeSlot, RelevanceVerdict
from .servicer import (
    batch_match_response,
    item_from_proto,
    match_not_served,
    relevance_item_from_proto,
    relevance_to_proto,
    result_to_proto,
)

__all__ = ["EnsembleDeployment", "build_app"]


@serve.deployment(name="ensemble")
class EnsembleDeployment(ServeApp, service="ensemble"):
    """A replica: the profile's matcher (judges + aggregator, or features), pairs batched."""

    def __init__(
        self,
        settings_data: dict[str, Any],
        *,
        serve_match: bool = True,
        preload_relevance: bool = False,
    ) -> None:
        settings = Settings(**settings_data)
        super().__init__(settings)
        # A relevance-only deployment (bulk labelling) loads no matching models.
        self._matcher = load_matcher(settings) if serve_match else None
        self.relevance = RelevanceJudgeSlot(settings)
        if preload_relevance:
            self.relevance.preload()
        size_gathered(self, settings.ensemble.deployment)

    @property
    def matcher(self) -> Matcher:
        if self._matcher is None:
            raise match_not_served()
        return self._matcher

    @gathered
    def match_one(self, items: list[MatchRequestItem]) -> list[MatchResult]:
        """One pair in, one result out; Serve gathers concurrent calls into one batch."""
        return self.matcher.match(items)

    async def match(self, items: list[MatchRequestItem]) -> list[MatchResult]:
        """A caller's own batch runs as it is; a single pair joins the Serve batch."""
        self.matcher.validate(items)
        if len(items) == 1:
            return [await self.match_one(items[0])]
        return await asyncio.to_thread(self.matcher.match, items)

    async def Match(
        self, request: ensemble_pb2.MatchRequest, grpc_context: Any = None
    ) -> ensemble_pb2.MatchResponse:
        return result_to_proto((await self.match([item_from_proto(request)]))[0], request.item_id)

    async def BatchMatch(
        self, request: ensemble_pb2.BatchMatchRequest, grpc_context: Any = None
    ) -> ensemble_pb2.BatchMatchResponse:
        return batch_match_response(
            await self.match([item_from_proto(m) for m in request.items]), request
        )

    @gathered
    def judge_relevance_batch(self, items: list[RelevanceItem]) -> list[RelevanceVerdict]:
        """One item in, one verdict out; Serve gathers concurrent calls into one batch."""
        return self.relevance.get().judge(items)

    async def JudgeRelevance(
        self, request: ensemble_pb2.JudgeRelevanceRequest, grpc_context: Any = None
    ) -> ensemble_pb2.JudgeRelevanceResponse:
        # Load (or report the missing artifact) and check the item here, so one bad
        # item fails alone instead of failing the Serve batch it would have joined.
        judge = await asyncio.to_thread(self.relevance.get)
        item = relevance_item_from_proto(request)
        judge.validate([item])
        verdict = await self.judge_relevance_batch(item)
        return relevance_to_proto(verdict, judge.artifact, request.item_id)


def build_app(
    settings: Settings, *, serve_match: bool = True, preload_relevance: bool = False
) -> Application:
    """The ensemble application, scaled like the other model services (``serve_match`` and
    ``preload_relevance`` as in :func:`~tribunal.ensemble.servicer.build_host`)."""
    deployment = cast(Any, EnsembleDeployment).options(**settings.ensemble.deployment.ray_options())
    app: Application = deployment.bind(
        settings.model_dump(mode="json"),
        serve_match=serve_match,
        preload_relevance=preload_relevance,
    )
    return app
