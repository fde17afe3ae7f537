"""``Gateway.Label``: cheap judges first, the debate when they are unsure, humans last.

The cheap judge is the ensemble service's relevance judge (``JudgeRelevance``: a
logistic regression over an LLM's P(yes) and an embedding cosine, fitted on
relevance data), whose artifact carries its decision points. Modes
(:class:`LabelMode`): ``judge`` (P(relevant) >= the artifact's threshold),
``debate`` (DREAM on every item) and ``cascade`` (the default: relevant when P >=
band_high, irrelevant when P <= band_low, the debate in between;
``gateway.label_relevant_at`` / ``label_irrelevant_at`` override the band's ends;
``gateway.label_band_to: human`` sends the band to the human queue instead of the debate,
as a label plan does).
A debate that ends ESCALATED or FAILED, and any stage failure, puts the item in the
human queue: a labelling request never gets a guessed label. A failure is audited as
``Answer``'s are: the failed stage, the error kind (``STAGE_ERROR``, ``STAGE_TIMEOUT``,
``MALFORMED_RESPONSE``) and the message — a debate that ends FAILED (an agent's answer
still invalid after its retries) is a ``STAGE_ERROR`` of stage ``debate``.
"""

from __future__ import annotations

import logging
import math
import uuid
from typing import Any

from google.protobuf.json_format import MessageToDict

from ..core import GatewaySettings, InvalidArgumentError, TribunalError
from ..core.storage import Database, DecisionRecord, EscalationRecord
from ..v1 import common_pb2, debate_pb2, ensemble_pb2, gateway_pb2
from ._label_modes import LabelMode
from ._metrics import record_decision
from ._stages import (
    Deadline,
    FailureKind,
    StageError,
    StageTransport,
    call_stage,
    check_probability,
)
from ._trace import RequestTrace

__all__ = ["LabelPipeline"]

log = logging.getLogger(__name__)

_DEBATE_LABELLED = (debate_pb2.DEBATE_OUTCOME_AGREED, debate_pb2.DEBATE_OUTCOME_ADJUDICATED)


class LabelPipeline:
    """Relevance labelling of one (query, chunk, answers) item; thread-safe."""

    def __init__(
        self, settings: GatewaySettings, transport: StageTransport, *, store: Database | None
    ) -> None:
        self.settings = settings
        self.transport = transport
        self.store = store

    def validate(self, request: gateway_pb2.LabelRequest) -> None:
        if not request.query.strip():
            raise InvalidArgumentError("query is empty", field="query")
        if not request.chunk.strip():
            raise InvalidArgumentError("chunk is empty: send the passage to label", field="chunk")
        if len(request.query) > self.settings.max_query_chars:
            raise InvalidArgumentError(
                f"query is longer than {self.settings.max_query_chars} characters", field="query"
            )
        if len(request.chunk) > self.settings.max_chunk_chars:
            raise InvalidArgumentError(
                f"chunk has {len(request.chunk)} characters; the limit is "
                f"{self.settings.max_chunk_chars} (gateway.max_chunk_chars)",
                field="chunk",
            )
        for i, answer in enumerate(request.answers):
            if not answer.strip():
                raise InvalidArgumentError(f"answers[{i}] is empty", field=f"answers[{i}]")
        self.mode(request)

    def mode(self, request: gateway_pb2.LabelRequest) -> LabelMode:
        """The request's mode, or ``gateway.label_mode`` when it leaves it unspecified."""
        if request.mode == gateway_pb2.LABEL_MODE_UNSPECIFIED:
            return LabelMode(self.settings.label_mode)
        return LabelMode.from_proto(request.mode)

    def label(
        self, request: gateway_pb2.LabelRequest, *, deadline_s: float | None = None
    ) -> gateway_pb2.LabelResponse:
        self.validate(request)
        trace = RequestTrace(
            kind="label", request_id=request.item_id or uuid.uuid4().hex, query=request.query
        )
        mode = self.mode(request)
        trace.detail["mode"] = mode.name
        budget = self.settings.deadline_s if deadline_s is None else deadline_s
        deadline = Deadline(min(budget, self.settings.deadline_s))
        response = gateway_pb2.LabelResponse(item_id=request.item_id)
        try:
            if mode is not LabelMode.DEBATE:
                verdict = self._judge(trace, deadline, request, response)
                p_relevant = verdict.p_relevant
                response.p_relevant = p_relevant
                if mode is LabelMode.JUDGE:
                    relevant = p_relevant >= verdict.threshold
                    _set_label(response, relevant, gateway_pb2.LABEL_SOURCE_JUDGES)
                else:
                    high, low = self._band(verdict)
                    trace.signals["judges"]["band"] = [low, high]  # as applied (overrides)
                    if p_relevant >= high:
                        _set_label(response, True, gateway_pb2.LABEL_SOURCE_JUDGES)
                    elif p_relevant <= low:
                        _set_label(response, False, gateway_pb2.LABEL_SOURCE_JUDGES)
                    elif self.settings.label_band_to == "human":
                        # A label plan's band: humans, no debate.
                        trace.detail["escalation_reason"] = "band"
                        response.source = gateway_pb2.LABEL_SOURCE_HUMAN_QUEUE
            if response.source == gateway_pb2.LABEL_SOURCE_UNSPECIFIED:
                self._debate(trace, deadline, request, response)
        except StageError as failure:
            log.warning("label escalated", extra={"stage": failure.stage, "why": str(failure)})
            trace.detail["error"] = failure.message
            trace.detail["failed_stage"] = failure.stage
            trace.detail["error_kind"] = failure.kind.value
            trace.detail["escalation_reason"] = f"{failure.kind.value.lower()}:{failure.stage}"
            response.label = common_pb2.LABEL_UNSPECIFIED
            response.source = gateway_pb2.LABEL_SOURCE_HUMAN_QUEUE
        return self._audited(trace, request, response)

    def _call(self, stage: str, method: str, request: Any, timeout_s: float) -> Any:
        return call_stage(
            self.transport,
            stage,
            method,
            request,
            timeout_s=timeout_s,
            retries=self.settings.retries,
            backoff_s=self.settings.retry_backoff_s,
        )

    def _band(self, verdict: ensemble_pb2.JudgeRelevanceResponse) -> tuple[float, float]:
        """(relevant at, irrelevant at): the settings where set, else the artifact's band."""
        high = self.settings.label_relevant_at
        low = self.settings.label_irrelevant_at
        return (
            verdict.band_high if high is None else high,
            verdict.band_low if low is None else low,
        )

    def _judge(
        self,
        trace: RequestTrace,
        deadline: Deadline,
        request: gateway_pb2.LabelRequest,
        response: gateway_pb2.LabelResponse,
    ) -> ensemble_pb2.JudgeRelevanceResponse:
        """The relevance judge's verdict on the chunk for the query (checked)."""
        timeout = deadline.budget(
            "verify",
            ["debate"],
            self.settings.stage_share,
            self.settings.stage_timeout_s.get("ensemble", math.inf),
        )
        with trace.stage("ensemble"):
            verdict: ensemble_pb2.JudgeRelevanceResponse = self._call(
                "ensemble",
                "JudgeRelevance",
                ensemble_pb2.JudgeRelevanceRequest(
                    query=request.query,
                    chunk=request.chunk,
                    answers=list(request.answers),
                    item_id=request.item_id,
                ),
                timeout,
            )
        p_relevant = check_probability("ensemble", "p_relevant", verdict.p_relevant)
        for what in ("threshold", "band_low", "band_high"):
            check_probability("ensemble", what, getattr(verdict, what))
        if not verdict.band_low <= verdict.band_high:
            raise StageError(
                "ensemble",
                FailureKind.MALFORMED,
                f"band_low {verdict.band_low} > band_high {verdict.band_high}",
            )
        features = {}
        for feature in verdict.features:
            if not math.isfinite(feature.value):  # the audit store's JSON takes no NaN
                raise StageError(
                    "ensemble", FailureKind.MALFORMED, f"feature {feature.name} = {feature.value}"
                )
            features[feature.name] = feature.value
        trace.signals["judges"] = {"p_relevant": p_relevant, "features": features}
        trace.versions["ensemble"] = {
            "judge": "relevance",
            "artifact": verdict.artifact_version,
            "threshold": verdict.threshold,
            "band": [verdict.band_low, verdict.band_high],
        }
        _add_usage(response, verdict.usage)
        return verdict

    def _debate(
        self,
        trace: RequestTrace,
        deadline: Deadline,
        request: gateway_pb2.LabelRequest,
        response: gateway_pb2.LabelResponse,
    ) -> None:
        timeout = deadline.budget(
            "debate",
            [],
            self.settings.stage_share,
            self.settings.stage_timeout_s.get("debate", math.inf),
        )
        assess = debate_pb2.AssessRequest(
            query=request.query,
            chunk=request.chunk,
            answers=list(request.answers),
            max_rounds=self.settings.label_max_rounds,
            item_id=request.item_id,
        )
        with trace.stage("debate"):
            result = self._call("debate", "Assess", assess, timeout)
        response.debate.CopyFrom(result)
        _add_usage(response, result.usage)
        trace.versions["debate"] = MessageToDict(
            result.provenance, preserving_proto_field_name=True
        )
        trace.signals["debate"] = {
            "outcome": debate_pb2.DebateOutcome.Name(result.outcome),
            "rounds": len(result.rounds),
        }
        if result.outcome in _DEBATE_LABELLED:
            if result.label == common_pb2.LABEL_UNSPECIFIED:
                raise StageError("debate", FailureKind.MALFORMED, "agreed without a label")
            response.label = result.label
            response.source = gateway_pb2.LABEL_SOURCE_DEBATE
            return
        if result.outcome == debate_pb2.DEBATE_OUTCOME_FAILED:
            # The debate ran but could not finish (an agent's answer stayed invalid after
            # its retries): a failure of the stage, audited as one; the history is kept.
            raise StageError(
                "debate", FailureKind.ERROR, result.error or "the debate failed without a reason"
            )
        # ESCALATED (persistent disagreement): humans decide.
        response.label = common_pb2.LABEL_UNSPECIFIED
        response.source = gateway_pb2.LABEL_SOURCE_HUMAN_QUEUE
        trace.detail["escalation_reason"] = debate_pb2.DebateOutcome.Name(result.outcome).lower()

    def _audited(
        self,
        trace: RequestTrace,
        request: gateway_pb2.LabelRequest,
        response: gateway_pb2.LabelResponse,
    ) -> gateway_pb2.LabelResponse:
        record_decision(
            "label",
            common_pb2.Label.Name(response.label).removeprefix("LABEL_")
            if response.label
            else "ESCALATED",
            str(trace.detail.get("escalation_reason", "")),
            trace.latencies_ms,
        )
        if self.store is None:
            if response.source == gateway_pb2.LABEL_SOURCE_HUMAN_QUEUE:
                log.warning("item needs a human but the store is off (gateway.audit=false)")
            return response
        decision = (
            common_pb2.Label.Name(response.label).removeprefix("LABEL_")
            if response.label
            else "ESCALATED"
        )
        record = DecisionRecord(
            kind="label",
            query=trace.query,
            decision=decision,
            request_id=trace.request_id,
            reason=str(trace.detail.get("escalation_reason", "")),
            failed_stage=str(trace.detail.get("failed_stage", "")),
            error=str(trace.detail.get("error", "")),
            confidence=response.p_relevant if response.HasField("p_relevant") else None,
            signals=trace.signals,
            versions=trace.versions,
            latencies_ms=dict(trace.latencies_ms),
            total_ms=trace.total_ms(),
            detail={
                "mode": trace.detail.get("mode"),
                "source": gateway_pb2.LabelSource.Name(response.source),
                **(
                    {"error_kind": trace.detail["error_kind"]}
                    if "error_kind" in trace.detail
                    else {}
                ),
            },
        )
        escalation = None
        if response.source == gateway_pb2.LABEL_SOURCE_HUMAN_QUEUE:
            history = (
                MessageToDict(response.debate, preserving_proto_field_name=True)
                if response.HasField("debate")
                else {}
            )
            escalation = EscalationRecord(
                query=request.query,
                chunk=request.chunk,
                answers=tuple(request.answers),
                item_id=request.item_id,
                reason=record.reason or "unsure",
                history=history,
            )
        try:
            # One transaction: an escalation is never queued without its decision.
            response.audit_id, escalation_id = self.store.record_decision(record, escalation)
            if escalation is not None:
                response.escalation_id = escalation_id
        except TribunalError as exc:
            # A label nobody can audit is not a label: hand the item back unlabelled.
            log.error("audit write failed", extra={"why": str(exc)})
            raise
        return response


def _set_label(response: gateway_pb2.LabelResponse, relevant: bool, source: int) -> None:
    response.label = common_pb2.LABEL_RELEVANT if relevant else common_pb2.LABEL_IRRELEVANT
    response.source = source  # type: ignore[assignment]


def _add_usage(response: gateway_pb2.LabelResponse, usage: common_pb2.TokenUsage) -> None:
    response.usage.prompt_tokens += usage.prompt_tokens
    response.usage.completion_tokens += usage.completion_tokens
