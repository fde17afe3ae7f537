"""The decision of ``Answer`` once its candidates are scored: ACCEPT, FALLBACK or
ESCALATE, under the collection's serving mode (normal, or the safe mode its live audit
put it in)."""

from __future__ import annotations

from collections.abc import Sequence

from ..audit import NORMAL
from ..confidence import ScoreResult, ThresholdStatus
from ..core import GatewaySettings, InvalidArgumentError
from ..v1 import common_pb2, confidence_pb2, gateway_pb2, retrieval_pb2
from ._accept import build_accept
from ._answer_record import REVIEW_ENTRY, audit_signals
from ._checks import AnswerPolicy
from ._live_audit import LiveAudit
from ._trace import RequestTrace

__all__ = ["decide", "fallback_response"]


def decide(
    trace: RequestTrace,
    candidates: Sequence[retrieval_pb2.SearchHit],
    signals: Sequence[confidence_pb2.Signals],
    scores: Sequence[ScoreResult],
    kb_version: int,
    *,
    settings: GatewaySettings,
    policy: AnswerPolicy,
    audit: LiveAudit | None,
) -> gateway_pb2.AnswerResponse:
    """The decision on the scored candidates: the best one is served (ACCEPT) when its
    confidence clears the trusted threshold under the collection's serving mode, else a
    FALLBACK (or an ESCALATE, when configured)."""
    audit_signals(trace, candidates, signals, scores)
    best = max(range(len(candidates)), key=lambda i: scores[i].confidence)
    hit, score = candidates[best], scores[best]
    trace.detail["best_candidate"] = hit.entry.id
    trace.detail[REVIEW_ENTRY] = {
        "id": hit.entry.id,
        "question": hit.entry.question,
        "answer": hit.entry.answer,
        "calibrator": score.calibrator_version,
    }
    if score.status is ThresholdStatus.NOT_CERTIFIED:
        # A configured state, not a stage fault: no threshold is certified for alpha.
        response = fallback_response(
            settings, trace, gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
        )
        response.confidence = score.confidence
        return response
    if audit is not None:
        mode = audit.mode(trace.collection, score.calibrator_version)
        if mode != NORMAL:
            safe = _safe_mode(
                trace, mode, hit, score, settings=settings, policy=policy, audit=audit
            )
            if safe is not None:
                return safe
    if score.decision.value == "accept":
        return build_accept(trace, hit, score, kb_version, policy)
    response = fallback_response(settings, trace, gateway_pb2.FALLBACK_REASON_LOW_CONFIDENCE)
    response.confidence = score.confidence
    response.threshold = score.threshold
    if score.decision.value == "escalate" and settings.escalate_to == "human":
        response.decision = common_pb2.DECISION_ESCALATE
        trace.detail["escalate"] = {
            "kb_entry_id": hit.entry.id,
            "answer": hit.entry.answer,
            "confidence": score.confidence,
        }
    return response


def _safe_mode(
    trace: RequestTrace,
    mode: str,
    hit: retrieval_pb2.SearchHit,
    score: ScoreResult,
    *,
    settings: GatewaySettings,
    policy: AnswerPolicy,
    audit: LiveAudit,
) -> gateway_pb2.AnswerResponse | None:
    """The live bound showed this calibrator's rate above alpha: serve the collection's
    safe mode until a new artifact is certified. None: the stricter threshold admits
    the answer (decided as usual)."""
    trace.detail["safe_mode"] = mode
    why = f"safe mode ({mode}): the live audit showed a hallucination rate above alpha"
    safe_alpha = audit.settings.safe_alpha
    if mode == "stricter" and safe_alpha is not None:
        try:
            stricter = policy.scorer.artifact.threshold_for(safe_alpha).threshold
        except InvalidArgumentError:
            stricter = None  # the artifact holds no threshold for it: fall back
        if stricter is not None:
            if score.confidence >= stricter:
                return None  # at or above the normal threshold too: decided as usual
            response = fallback_response(
                settings, trace, gateway_pb2.FALLBACK_REASON_LOW_CONFIDENCE
            )
            response.confidence = score.confidence
            response.threshold = stricter
            return response
    response = fallback_response(
        settings, trace, gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD, error=why
    )
    response.confidence = score.confidence
    if mode == "escalate" and score.decision.value != "fallback":
        response.decision = common_pb2.DECISION_ESCALATE
        trace.detail["escalate"] = {
            "kb_entry_id": hit.entry.id,
            "answer": hit.entry.answer,
            "confidence": score.confidence,
            "reason": "safe_mode",
        }
    return response


def fallback_response(
    settings: GatewaySettings,
    trace: RequestTrace,
    reason: int,
    *,
    stage: str = "",
    error: str = "",
) -> gateway_pb2.AnswerResponse:
    """A FALLBACK with the configured answer; ``error`` goes into the audit record."""
    if error:
        trace.detail["error"] = error
    return gateway_pb2.AnswerResponse(
        decision=common_pb2.DECISION_FALLBACK,
        answer=settings.fallback_answer,
        fallback_reason=reason,  # type: ignore[arg-type]
        failed_stage=stage,
    )
