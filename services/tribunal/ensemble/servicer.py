"""gRPC adapter of the ensemble service: ``tribunal.v1.EnsembleService``.

Each method: translate the request, run the :class:`EnsembleMatcher`, build the
response. Errors are Tribunal errors; the runtime's interceptor maps them to status
codes.
"""

from __future__ import annotations

import threading

import grpc

from ..core import Settings, UnavailableError
from ..core.server import ServiceBinding, ServiceHost
from ..retrieval.servicer import entry_from_proto
from ..v1 import common_pb2, ensemble_pb2, ensemble_pb2_grpc
from ._matcher import EnsembleMatcher, MatchRequestItem, MatchResult

__all__ = ["SERVICE_NAME", "EnsembleServicer", "build_host", "item_from_proto", "result_to_proto"]

SERVICE_NAME = "tribunal.v1.EnsembleService"


def item_from_proto(message: ensemble_pb2.MatchRequest) -> MatchRequestItem:
    return MatchRequestItem(message.query, entry_from_proto(message.candidate))


def result_to_proto(result: MatchResult) -> ensemble_pb2.MatchResponse:
    return ensemble_pb2.MatchResponse(
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


class EnsembleServicer(ensemble_pb2_grpc.EnsembleServiceServicer):
    """Serves a matcher once it is loaded (``set_matcher``); UNAVAILABLE before."""

    def __init__(self, matcher: EnsembleMatcher | None = None) -> None:
        self._matcher = matcher
        self._lock = threading.Lock()

    def set_matcher(self, matcher: EnsembleMatcher) -> None:
        self._matcher = matcher

    def _ready(self) -> EnsembleMatcher:
        if self._matcher is None:
            raise UnavailableError("the ensemble judges are still loading")
        return self._matcher

    def Match(
        self, request: ensemble_pb2.MatchRequest, context: grpc.ServicerContext
    ) -> ensemble_pb2.MatchResponse:
        matcher = self._ready()
        with self._lock:  # one batch on the judges at a time keeps their prefix caches warm
            return result_to_proto(matcher.match([item_from_proto(request)])[0])

    def BatchMatch(
        self, request: ensemble_pb2.BatchMatchRequest, context: grpc.ServicerContext
    ) -> ensemble_pb2.BatchMatchResponse:
        matcher = self._ready()
        items = [item_from_proto(m) for m in request.items]
        with self._lock:
            results = matcher.match(items)
        return ensemble_pb2.BatchMatchResponse(results=[result_to_proto(r) for r in results])


def build_host(settings: Settings) -> ServiceHost:
    """A ServiceHost whose loader builds the profile's matcher (``tribunal serve ensemble``)."""
    servicer = EnsembleServicer()
    return ServiceHost(
        settings.server,
        name="ensemble",
        bindings=[
            ServiceBinding(
                SERVICE_NAME,
                lambda server: ensemble_pb2_grpc.add_EnsembleServiceServicer_to_server(
                    servicer, server
                ),
            )
        ],
        loader=lambda: servicer.set_matcher(EnsembleMatcher.from_settings(settings)),
    )
