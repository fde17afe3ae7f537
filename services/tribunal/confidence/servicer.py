"""gRPC adapter of the confidence service: proto → domain → proto, nothing else.

Errors are domain exceptions; the :class:`~tribunal.core.server.ServiceHost`
interceptor maps them to status codes (INVALID_ARGUMENT with the field,
RESOURCE_EXHAUSTED for an oversized batch).
"""

from __future__ import annotations

import grpc

from ..core import (
    InvalidArgumentError,
    ResourceExhaustedError,
    Settings,
    TribunalError,
    python_turn,
)
from ..core.server import ServiceHost
from ..v1 import common_pb2, confidence_pb2, confidence_pb2_grpc
from ._proto import signals_from_proto
from ._scorer import ConfidenceScorer, RequestVersions, ScoreResult, ThresholdStatus
from ._signals import Signals

__all__ = ["ConfidenceServicer", "build_host", "response_from_result", "signals_from_proto"]

SERVICE_NAME = "tribunal.v1.ConfidenceService"

_THRESHOLD_STATUS = {
    ThresholdStatus.CERTIFIED: confidence_pb2.THRESHOLD_STATUS_CERTIFIED,
    ThresholdStatus.PLAIN: confidence_pb2.THRESHOLD_STATUS_PLAIN,
    ThresholdStatus.NOT_CERTIFIED: confidence_pb2.THRESHOLD_STATUS_NOT_CERTIFIED,
}
_DECISION = {
    "accept": common_pb2.DECISION_ACCEPT,
    "escalate": common_pb2.DECISION_ESCALATE,
    "fallback": common_pb2.DECISION_FALLBACK,
}


def response_from_result(result: ScoreResult, item_id: str = "") -> confidence_pb2.ScoreResponse:
    return confidence_pb2.ScoreResponse(
        item_id=item_id,
        confidence=result.confidence,
        decision=_DECISION[result.decision.value],
        threshold=result.threshold,
        calibrator_version=result.calibrator_version,
        alpha=result.alpha,
        threshold_status=_THRESHOLD_STATUS[result.status],
    )


def _versions(request: confidence_pb2.ScoreRequest) -> RequestVersions:
    """The KB, matcher and retrieval model the caller reports (empty strings: not
    reported)."""
    return RequestVersions(
        collection_version=request.kb_content_version,
        matcher=request.matcher_version,
        retrieval_model=request.retrieval_model,
    )


def _request(request: confidence_pb2.ScoreRequest, prefix: str) -> tuple[Signals, float | None]:
    try:
        signals = signals_from_proto(request.signals)
    except TribunalError as exc:
        raise InvalidArgumentError(exc.message, field=f"{prefix}{exc.field}") from None
    return signals, request.alpha if request.HasField("alpha") else None


class ConfidenceServicer(confidence_pb2_grpc.ConfidenceServiceServicer):
    """``Score`` and ``BatchScore`` on a :class:`ConfidenceScorer` set once it is loaded.

    Args:
        max_items_per_request: Most items one ``BatchScore`` may carry.
    """

    def __init__(self, max_items_per_request: int) -> None:
        self.max_items_per_request = max_items_per_request
        self.scorer: ConfidenceScorer | None = None

    def _scorer(self) -> ConfidenceScorer:
        # The host answers UNAVAILABLE until the loader has set the scorer.
        assert self.scorer is not None, "called before the calibrator was loaded"
        return self.scorer

    def Score(
        self, request: confidence_pb2.ScoreRequest, context: grpc.ServicerContext
    ) -> confidence_pb2.ScoreResponse:
        signals, alpha = _request(request, "")
        result = self._scorer().score(signals, alpha, _versions(request))
        return response_from_result(result, request.item_id)

    def BatchScore(
        self, request: confidence_pb2.BatchScoreRequest, context: grpc.ServicerContext
    ) -> confidence_pb2.BatchScoreResponse:
        count = len(request.items)
        if count > self.max_items_per_request:
            raise ResourceExhaustedError(
                f"BatchScore got {count} items; at most {self.max_items_per_request} per call "
                "(confidence.max_items_per_request): split the batch"
            )
        if not count:
            return confidence_pb2.BatchScoreResponse(request_id=request.request_id)
        scorer = self._scorer()
        with python_turn():
            parsed = [_request(item, f"items[{i}].") for i, item in enumerate(request.items)]
            results = scorer.score_many(
                [s for s, _ in parsed],
                [a for _, a in parsed],
                [_versions(item) for item in request.items],
            )
            return confidence_pb2.BatchScoreResponse(
                request_id=request.request_id,
                results=[
                    response_from_result(r, item.item_id)
                    for r, item in zip(results, request.items, strict=True)
                ],
            )


def build_host(settings: Settings) -> ServiceHost:
    """The confidence service in a ServiceHost (not started): NOT_SERVING until the
    calibrator artifact is loaded."""
    servicer = ConfidenceServicer(settings.confidence.max_items_per_request)

    def load() -> None:
        servicer.scorer = ConfidenceScorer.from_settings(settings)

    return ServiceHost.for_servicer(
        settings,
        name="confidence",
        full_name=SERVICE_NAME,
        add_servicer=confidence_pb2_grpc.add_ConfidenceServiceServicer_to_server,
        servicer=servicer,
        loader=load,
    )
