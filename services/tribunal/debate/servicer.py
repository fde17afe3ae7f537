"""gRPC adapter of the debate service: ``tribunal.v1.DebateService``.

Each method: translate the request (validated by the domain, fields named as in the
proto), run :class:`DreamDebate`, build the response. ``BatchAssess`` streams each
item's result as soon as the round that ends it is done. Errors are Tribunal errors;
the runtime's interceptor maps them to status codes.
"""

from __future__ import annotations

from collections.abc import Iterator

import grpc

from ..core import Settings, UnavailableError
from ..core.llm import Usage
from ..core.server import ServiceHost
from ..v1 import common_pb2, debate_pb2, debate_pb2_grpc
from ._debate import DreamDebate
from ._types import AgentTurn, DebateItem, DebateLabel, DebateOutcome, DebateResult

__all__ = [
    "SERVICE_NAME",
    "DebateServicer",
    "batch_item_response",
    "build_host",
    "item_from_proto",
    "result_to_proto",
]

SERVICE_NAME = "tribunal.v1.DebateService"

_LABELS = {
    DebateLabel.RELEVANT: common_pb2.LABEL_RELEVANT,
    DebateLabel.IRRELEVANT: common_pb2.LABEL_IRRELEVANT,
}
_OUTCOMES = {
    DebateOutcome.AGREED: debate_pb2.DEBATE_OUTCOME_AGREED,
    DebateOutcome.ESCALATED: debate_pb2.DEBATE_OUTCOME_ESCALATED,
    DebateOutcome.ADJUDICATED: debate_pb2.DEBATE_OUTCOME_ADJUDICATED,
    DebateOutcome.FAILED: debate_pb2.DEBATE_OUTCOME_FAILED,
}


def item_from_proto(request: debate_pb2.AssessRequest) -> DebateItem:
    options = request.options
    return DebateItem(
        query=request.query,
        chunk=request.chunk,
        answers=tuple(request.answers),
        item_id=request.item_id,
        max_rounds=request.max_rounds,
        # proto3 bool: false means "not asked", which is the configured default order.
        swap_stance_order=True if options.swap_stance_order else None,
        adjudicate=options.adjudicate if options.HasField("adjudicate") else None,
    )


def _usage(usage: Usage) -> common_pb2.TokenUsage:
    return common_pb2.TokenUsage(
        prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens
    )


def _turn(turn: AgentTurn) -> debate_pb2.DebateTurn:
    return debate_pb2.DebateTurn(
        agent=turn.agent,
        model=turn.model,
        label=_LABELS[turn.label] if turn.label is not None else common_pb2.LABEL_UNSPECIFIED,
        evidence=turn.evidence,
        rationale=turn.rationale,
        evidence_found=turn.evidence_found,
        usage=_usage(turn.usage),
    )


def result_to_proto(result: DebateResult, profile: str = "") -> debate_pb2.AssessResponse:
    adjudication = result.adjudication
    return debate_pb2.AssessResponse(
        label=_LABELS[result.label] if result.label is not None else common_pb2.LABEL_UNSPECIFIED,
        outcome=_OUTCOMES[result.outcome],
        rounds=[
            debate_pb2.DebateRound(number=r.number, turns=[_turn(t) for t in r.turns])
            for r in result.rounds
        ],
        adjudication=adjudication.rationale if adjudication is not None else "",
        usage=_usage(result.usage),
        milliseconds=result.seconds * 1000.0,
        item_id=result.item_id,
        error=result.error,
        provenance=common_pb2.Provenance(
            profile=profile, models=result.models, prompts=result.prompts
        ),
    )


def batch_item_response(
    index: int, result: DebateResult, profile: str = ""
) -> debate_pb2.BatchAssessResponse:
    """One streamed ``BatchAssess`` reply: item ``index`` of the request is done."""
    return debate_pb2.BatchAssessResponse(index=index, result=result_to_proto(result, profile))


class DebateServicer(debate_pb2_grpc.DebateServiceServicer):
    """Serves a debate once it is loaded (``set_debate``); UNAVAILABLE before."""

    def __init__(self, debate: DreamDebate | None = None) -> None:
        self._debate = debate

    def set_debate(self, debate: DreamDebate) -> None:
        self._debate = debate

    def _ready(self) -> DreamDebate:
        if self._debate is None:
            raise UnavailableError("the debate agents are still loading")
        return self._debate

    def Assess(
        self, request: debate_pb2.AssessRequest, context: grpc.ServicerContext
    ) -> debate_pb2.AssessResponse:
        debate = self._ready()
        return result_to_proto(debate.assess(item_from_proto(request)), debate.profile)

    def BatchAssess(
        self, request: debate_pb2.BatchAssessRequest, context: grpc.ServicerContext
    ) -> Iterator[debate_pb2.BatchAssessResponse]:
        debate = self._ready()
        items = [item_from_proto(one) for one in request.items]
        for index, result in debate.stream(items):
            yield batch_item_response(index, result, debate.profile)


def build_host(settings: Settings) -> ServiceHost:
    """A ServiceHost whose loader builds the profile's debate (``tribunal serve debate``)."""
    from ._factory import build_debate

    servicer = DebateServicer()
    return ServiceHost.for_servicer(
        settings,
        name="debate",
        full_name=SERVICE_NAME,
        add_servicer=debate_pb2_grpc.add_DebateServiceServicer_to_server,
        servicer=servicer,
        loader=lambda: servicer.set_debate(build_debate(settings)),
    )
