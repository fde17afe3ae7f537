"""gRPC adapter of the entailment service: ``tribunal.v1.EntailmentService``.

Each method: translate the request (rejecting what cannot be translated), run
the :class:`EntailmentCascade`, build the response. Errors are Tribunal errors;
the runtime's interceptor maps them to status codes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import grpc

from ..core import Settings, UnavailableError
from ..core.server import ServiceHost
from ..v1 import common_pb2, entailment_pb2, entailment_pb2_grpc
from ._cascade import CheckStage, EntailmentCascade, EntailmentLabel, EntailmentVerdict, PairToCheck
from ._quote import QuoteChecker, QuoteMatch

__all__ = [
    "SERVICE_NAME",
    "EntailmentServicer",
    "build_host",
    "check_quotes",
    "check_response",
    "pairs_from_proto",
    "verdict_to_proto",
]

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


def pairs_from_proto(request: entailment_pb2.CheckRequest) -> list[PairToCheck]:
    return [PairToCheck(p.premise, p.hypothesis, p.quote) for p in request.pairs]


def check_response(
    verdicts: Sequence[EntailmentVerdict], checker_version: str = ""
) -> entailment_pb2.CheckResponse:
    """The response of one ``Check``: counted from its own verdicts, so it stays right when
    a deployment gathers several requests into one cascade call."""
    return entailment_pb2.CheckResponse(
        checker_version=checker_version,
        results=[verdict_to_proto(v) for v in verdicts],
        strong_calls=sum(v.decided_by is CheckStage.STRONG for v in verdicts),
        usage=common_pb2.TokenUsage(prompt_tokens=sum(v.prompt_tokens for v in verdicts)),
    )


def check_quotes(
    checker: QuoteChecker, request: entailment_pb2.CheckQuotesRequest
) -> entailment_pb2.CheckQuotesResponse:
    """``CheckQuotes``: where each quote occurs in its premise (string matching only)."""
    return entailment_pb2.CheckQuotesResponse(
        matches=[_quote_to_proto(checker.find(q.premise, q.quote)) for q in request.quotes]
    )


class EntailmentServicer(entailment_pb2_grpc.EntailmentServiceServicer):
    """Serves a cascade once it is loaded (``set_cascade``); UNAVAILABLE before."""

    def __init__(self, cascade: EntailmentCascade | None = None, checker_version: str = "") -> None:
        self._cascade = cascade
        self._lock = threading.Lock()
        self.checker_version = checker_version
        """Reported in every CheckResponse (``tribunal.entailment.checker_version``)."""

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
        pairs = pairs_from_proto(request)
        # The checkers hold one model each; one batch at a time keeps their caches coherent.
        with self._lock:
            verdicts = cascade.check(pairs, fast_only=request.fast_only)
        return check_response(verdicts, self.checker_version)

    def CheckQuotes(
        self, request: entailment_pb2.CheckQuotesRequest, context: grpc.ServicerContext
    ) -> entailment_pb2.CheckQuotesResponse:
        return check_quotes(self._ready().quote_checker, request)


def build_host(settings: Settings) -> ServiceHost:
    """A ServiceHost whose loader builds the profile's cascade (``tribunal serve entailment``)."""
    from ._factory import build_cascade
    from ._version import checker_version

    servicer = EntailmentServicer(checker_version=checker_version(settings))
    return ServiceHost.for_servicer(
        settings,
        name="entailment",
        full_name=SERVICE_NAME,
        add_servicer=entailment_pb2_grpc.add_EntailmentServiceServicer_to_server,
        servicer=servicer,
        loader=lambda: servicer.set_cascade(build_cascade(settings)),
    )
