"""gRPC adapter of the ensemble service: ``tribunal.v1.EnsembleService``.

Each method: translate the request, run the matcher (:func:`load_matcher`; ``Match``,
``BatchMatch``) or the :class:`RelevanceJudge` (``JudgeRelevance``), build the
response. Errors are Tribunal errors; the runtime's interceptor maps them to status
codes.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Sequence

import grpc

from ..core import FailedPreconditionError, Settings, UnavailableError
from ..core.server import ServiceHost
from ..kb import entry_from_proto
from ..v1 import common_pb2, ensemble_pb2, ensemble_pb2_grpc
from ._feature_matcher import Matcher, load_matcher
from ._matcher import MatchRequestItem, MatchResult
from ._relevance import RelevanceArtifact, RelevanceItem, RelevanceJudgeSlot, RelevanceVerdict

__all__ = [
    "SERVICE_NAME",
    "EnsembleServicer",
    "batch_match_response",
    "build_host",
    "item_from_proto",
    "match_not_served",
    "relevance_item_from_proto",
    "relevance_to_proto",
    "result_to_proto",
]

SERVICE_NAME = "tribunal.v1.EnsembleService"


def match_not_served() -> FailedPreconditionError:
    """The error of Match / BatchMatch on a deployment started with ``serve_match=False``."""
    return FailedPreconditionError(
        "this ensemble deployment serves JudgeRelevance only (it was started for "
        "labelling): send Match to one that serves it"
    )


def item_from_proto(message: ensemble_pb2.MatchRequest) -> MatchRequestItem:
    return MatchRequestItem(message.query, entry_from_proto(message.candidate))


def result_to_proto(result: MatchResult, item_id: str = "") -> ensemble_pb2.MatchResponse:
    return ensemble_pb2.MatchResponse(
        item_id=item_id,
        threshold=result.threshold,
        p_match=result.p_match,
        match=result.match,
        judges=[
            ensemble_pb2.JudgeVerdict(
                judge=v.judge, model=v.model, prompt=v.prompt, vote=v.vote, p_yes=v.p_yes
            )
            for v in result.judges
        ],
        aggregator=result.aggregator,
        artifact_version=result.artifact_version,
        usage=common_pb2.TokenUsage(prompt_tokens=result.prompt_tokens),
    )


def batch_match_response(
    results: Sequence[MatchResult], request: ensemble_pb2.BatchMatchRequest | None = None
) -> ensemble_pb2.BatchMatchResponse:
    """The results in request order, echoing the request's id and each item's id."""
    if request is None:
        return ensemble_pb2.BatchMatchResponse(results=[result_to_proto(r) for r in results])
    return ensemble_pb2.BatchMatchResponse(
        request_id=request.request_id,
        results=[
            result_to_proto(r, item.item_id) for r, item in zip(results, request.items, strict=True)
        ],
    )


def relevance_item_from_proto(message: ensemble_pb2.JudgeRelevanceRequest) -> RelevanceItem:
    return RelevanceItem(message.query, message.chunk, tuple(message.answers))


def relevance_to_proto(
    verdict: RelevanceVerdict, artifact: RelevanceArtifact, item_id: str
) -> ensemble_pb2.JudgeRelevanceResponse:
    return ensemble_pb2.JudgeRelevanceResponse(
        p_relevant=verdict.p_relevant,
        relevant=verdict.relevant,
        threshold=artifact.threshold,
        band_low=artifact.band_low,
        band_high=artifact.band_high,
        features=[
            ensemble_pb2.RelevanceFeatureValue(name=name, value=value)
            for name, value in verdict.features
        ],
        usage=common_pb2.TokenUsage(prompt_tokens=verdict.prompt_tokens),
        artifact_version=artifact.version,
        item_id=item_id,
    )


class EnsembleServicer(ensemble_pb2_grpc.EnsembleServiceServicer):
    """Serves a matcher once it is loaded (``set_matcher``); UNAVAILABLE before.

    ``JudgeRelevance`` runs the ``relevance`` slot's judge (FAILED_PRECONDITION
    without an artifact); Match does not need it.
    """

    def __init__(
        self, matcher: Matcher | None = None, relevance: RelevanceJudgeSlot | None = None
    ) -> None:
        self._matcher = matcher
        self.relevance = relevance
        self._lock = threading.Lock()

    def set_matcher(self, matcher: Matcher) -> None:
        self._matcher = matcher

    serve_match: bool = True
    """False: this deployment serves JudgeRelevance only (``build_host(serve_match=False)``)."""

    def _turn(self, matcher: Matcher) -> contextlib.AbstractContextManager[object]:
        """One batch on the judges at a time keeps their prefix caches warm; a matcher that
        gathers concurrent calls itself (the feature matcher's embedder) gets them all."""
        return contextlib.nullcontext() if matcher.concurrent_calls else self._lock

    def _ready(self) -> Matcher:
        if not self.serve_match:
            raise match_not_served()
        if self._matcher is None:
            raise UnavailableError("the ensemble judges are still loading")
        return self._matcher

    def Match(
        self, request: ensemble_pb2.MatchRequest, context: grpc.ServicerContext
    ) -> ensemble_pb2.MatchResponse:
        matcher = self._ready()
        with self._turn(matcher):
            return result_to_proto(matcher.match([item_from_proto(request)])[0], request.item_id)

    def BatchMatch(
        self, request: ensemble_pb2.BatchMatchRequest, context: grpc.ServicerContext
    ) -> ensemble_pb2.BatchMatchResponse:
        matcher = self._ready()
        items = [item_from_proto(m) for m in request.items]
        with self._turn(matcher):
            results = matcher.match(items)
        return batch_match_response(results, request)

    def JudgeRelevance(
        self, request: ensemble_pb2.JudgeRelevanceRequest, context: grpc.ServicerContext
    ) -> ensemble_pb2.JudgeRelevanceResponse:
        if self.relevance is None:
            raise UnavailableError("the ensemble service is still loading")
        judge = self.relevance.get()
        [verdict] = judge.judge([relevance_item_from_proto(request)])
        return relevance_to_proto(verdict, judge.artifact, request.item_id)


def build_host(
    settings: Settings, *, serve_match: bool = True, preload_relevance: bool = False
) -> ServiceHost:
    """A ServiceHost whose loader builds the profile's matcher (``tribunal serve ensemble``).

    Args:
        serve_match: False: load no matcher and refuse ``Match`` (label jobs' stage
            hosts call only ``JudgeRelevance``; the matcher would be a load for nothing).
        preload_relevance: Load the relevance judge at start (if its artifact exists)
            instead of on the first ``JudgeRelevance``, so no labelled item waits for it.
    """
    servicer = EnsembleServicer()
    relevance = RelevanceJudgeSlot(settings)

    servicer.serve_match = serve_match

    def load() -> None:
        if serve_match:
            servicer.set_matcher(load_matcher(settings))
        if preload_relevance:
            relevance.preload()
        servicer.relevance = relevance

    return ServiceHost.for_servicer(
        settings,
        name="ensemble",
        full_name=SERVICE_NAME,
        add_servicer=ensemble_pb2_grpc.add_EnsembleServiceServicer_to_server,
        servicer=servicer,
        loader=load,
    )
