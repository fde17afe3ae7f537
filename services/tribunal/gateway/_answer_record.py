"""A decision of ``Answer`` written to the audit store, with its escalation or audit draw."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from google.protobuf.json_format import MessageToDict

from ..confidence import ScoreResult
from ..core.storage import Database, DecisionRecord, EscalationRecord
from ..v1 import common_pb2, confidence_pb2, gateway_pb2, retrieval_pb2
from ._live_audit import LiveAudit
from ._trace import RequestTrace

__all__ = ["REVIEW_ENTRY", "audit_signals", "decision_name", "reason_name", "write_decision"]

REVIEW_ENTRY = "review_entry"
"""Trace detail the audit coin reads (the entry a reviewer would see); not stored."""


def write_decision(
    store: Database,
    audit: LiveAudit | None,
    trace: RequestTrace,
    response: gateway_pb2.AnswerResponse,
) -> str:
    """The audit record (and the escalation, if any); returns the audit id."""
    has_confidence = response.HasField("confidence")
    audit_id = uuid.uuid4().hex
    review_entry = trace.detail.pop(REVIEW_ENTRY, None)
    escalate = trace.detail.get("escalate")
    escalation = (
        EscalationRecord(
            query=trace.query,
            chunk=str(escalate["answer"]),
            reason=str(escalate.get("reason", "low_confidence_match")),
            item_id=trace.request_id,
            history=escalate,
        )
        if escalate is not None
        else None
    )
    if audit is not None and escalation is None:
        # The audit coin: a random, recorded share of ACCEPTs and FALLBACKs is reviewed.
        draw, escalation = audit.sample(
            audit_id,
            decision=decision_name(response),
            confidence=response.confidence if has_confidence else None,
            query=trace.query,
            collection=trace.collection,
            entry=review_entry,
            calibrator_version=str((review_entry or {}).get("calibrator", "")),
        )
        trace.detail["audit"] = draw.to_json()
    # One transaction: an escalation is never queued without its decision.
    audit_id, _ = store.record_decision(
        DecisionRecord(
            id=audit_id,
            kind="answer",
            query=trace.query,
            decision=decision_name(response),
            request_id=trace.request_id,
            collection=trace.collection,
            reason=reason_name(response),
            failed_stage=response.failed_stage,
            error=str(trace.detail.get("error", "")),
            confidence=response.confidence if has_confidence else None,
            threshold=response.threshold if has_confidence else None,
            kb_entry_id=response.kb_entry_id,
            candidate_ids=trace.candidate_ids,
            signals=trace.signals,
            versions=trace.versions,
            latencies_ms=dict(trace.latencies_ms),
            total_ms=trace.total_ms(),
            detail={k: v for k, v in trace.detail.items() if k != "error"},
        ),
        escalation,
    )
    return audit_id


def decision_name(response: gateway_pb2.AnswerResponse) -> str:
    return common_pb2.Decision.Name(response.decision).removeprefix("DECISION_")


def reason_name(response: gateway_pb2.AnswerResponse) -> str:
    if not response.fallback_reason:
        return ""
    return gateway_pb2.FallbackReason.Name(response.fallback_reason).removeprefix(
        "FALLBACK_REASON_"
    )


def audit_signals(
    trace: RequestTrace,
    candidates: Sequence[retrieval_pb2.SearchHit],
    signals: Sequence[confidence_pb2.Signals],
    scores: Sequence[ScoreResult] | None,
) -> None:
    """Every candidate's signals (and verdict, when scored) go into the audit record."""
    for index, (hit, item_signals) in enumerate(zip(candidates, signals, strict=True)):
        record: dict[str, Any] = {
            "signals": MessageToDict(item_signals, preserving_proto_field_name=True)
        }
        if scores is not None:
            record["confidence"] = scores[index].confidence
            record["decision"] = scores[index].decision.value.upper()
        trace.signals[hit.entry.id] = record
