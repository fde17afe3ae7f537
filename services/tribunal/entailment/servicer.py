"""gRPC adapter of the entailment service: ``tribunal.v1.EntailmentService``.

Each method: translate the request (rejecting what cannot be translated), run
the :class:`EntailmentCascade`, build the response. Errors are Tribunal errors;
the runtime's interceptor maps them to status codes.
"""

from __future__ import annotations

import threading

import grpc

from ..core import Settings, UnavailableError
from ..core.server import ServiceBinding, ServiceHost
from ..v1 import common_pb2, entailment_pb2, entailment_pb2_grpc
from ._cascade import CheckStage, EntailmentCascade, EntailmentLabel, EntailmentVerdict, PairToCheck
from ._quote import QuoteMatch

__all__ = ["SERVICE_NAME", "EntailmentServicer", "build_host", "verdict_to_proto"]

SERVICE_NAME = "tribunal.v1.EntailmentService"

_LABELS = {
    EntailmentLabel.ENTAILED: entailment_pb2.ENTAILMENT_LABEL_ENTAILED,
    EntailmentLabel.NEUTRAL: entailment_pb2.ENTAILMENT_LABEL_NEUTRAL,
    EntailmentLabel.CONTRADICTED: entailment_pb2.ENTAILMENT_LABEL_CONTRADICTED,
    EntailmentLabel.QUOTE_NOT_FOUND: entailment_pb2.ENTAILMENT_LABEL_QUOTE_NOT_FOUND,
}
_STAGES = {
    CheckStage.QUOTE: entailment_pb2.CHECK_STAGE_QUOTE,
    CheckStage.FAST: entailment_pb2.CHECK_STAGE_FAST,
    CheckStage.STRONG: entailment_pb2.CHECK_STAGE_STRONG,
}


def _quote_to_proto(match: QuoteMatch) -> entailment_pb2.QuoteMatch:
    return entailment_pb2.QuoteMatch(
        found=match.found, ratio=match.ratio, start=match.start, end=match.end
    )


def verdict_to_proto(verdict: EntailmentVerdict) -> entailment_pb2.EntailmentResult:
    result = entailment_pb2.EntailmentResult(
        p_entail=verdict.p_entail,
        label=_LABELS[verdict.label],
        decided_by=_STAGES[verdict.decided_by],
        model=verdict.model,
    )
    if verdict.p_contradict is not None:
        result.p_contradict = verdict.p_contradict
    if verdict.supporting_chunk is not None:
        chunk = verdict.supporting_chunk
        result.supporting_chunk.CopyFrom(
            entailment_pb2.SupportingChunk(index=chunk.index, text=chunk.text, start=chunk.start)
        )
    if verdict.quote is not None:
        result.quote.CopyFrom(_quote_to_proto(verdict.quote))
    return result


class EntailmentServicer(entailment_pb2_grpc.EntailmentServiceServicer):
    """Serves a cascade once it is loaded (``set_cascade``); UNAVAILABLE before."""

    def __init__(self, cascade: EntailmentCascade | None = None) -> None:
        self._cascade = cascade
        self._lock = threading.Lock()

    def set_cascade(self, cascade: EntailmentCascade) -> None:
        self._cascade = cascade

    def _ready(self) -> EntailmentCascade:
        if self._cascade is None:
            raise UnavailableError("the entailment checkers are still loading")
        return self._cascade

    def Check(
        self, request: entailment_pb2.CheckRequest, context: grpc.ServicerContext
    ) -> entailment_pb2.CheckResponse:
        cascade = self._ready()
        pairs = [PairToCheck(p.premise, p.hypothesis, p.quote) for p in request.pairs]
        # The checkers hold one model each; one batch at a time keeps their caches coherent.
        with self._lock:
            before = cascade.strong_calls_
            verdicts = cascade.check(pairs, fast_only=request.fast_only)
            strong_calls = cascade.strong_calls_ - before
        return entailment_pb2.CheckResponse(
            results=[verdict_to_proto(v) for v in verdicts],
            strong_calls=strong_calls,
            usage=common_pb2.TokenUsage(prompt_tokens=sum(v.prompt_tokens for v in verdicts)),
        )

    def CheckQuotes(
        self, request: entailment_pb2.CheckQuotesRequest, context: grpc.ServicerContext
    ) -> entailment_pb2.CheckQuotesResponse:
        checker = self._ready().quote_checker
        return entailment_pb2.CheckQuotesResponse(
            matches=[_quote_to_proto(checker.find(q.premise, q.quote)) for q in request.quotes]
        )


def build_host(settings: Settings) -> ServiceHost:
    """A ServiceHost whose loader builds the profile's cascade (``tribunal serve entailment``)."""
    from ._factory import build_cascade

    servicer = EntailmentServicer()
    return ServiceHost(
        settings.server,
        name="entailment",
        bindings=[
            ServiceBinding(
                SERVICE_NAME,
                lambda server: entailment_pb2_grpc.add_EntailmentServiceServicer_to_server(
                    servicer, server
                ),
            )
        ],
        loader=lambda: servicer.set_cascade(build_cascade(settings)),
    )
