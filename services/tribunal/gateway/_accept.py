"""The only place an ACCEPT is built: an answer served verbatim, with what vouches for it.

The gateway's invariants are asserted once more here, whatever the pipeline before it
decided: the confidence reaches the trusted threshold, and the entry may be served (its
stored verification is current and its answer hashes to the stored sha256). A failure
is the gateway's own error, which the pipeline turns into a FALLBACK.
"""

from __future__ import annotations

from ..confidence import ScoreResult
from ..v1 import common_pb2, gateway_pb2, retrieval_pb2
from ._checks import AnswerPolicy, serving_problem
from ._stages import FailureKind, StageError
from ._trace import RequestTrace

__all__ = ["build_accept"]

_VERIFIED = retrieval_pb2.VERIFICATION_VERDICT_VERIFIED


def build_accept(
    trace: RequestTrace,
    hit: retrieval_pb2.SearchHit,
    score: ScoreResult,
    kb_version: int,
    policy: AnswerPolicy,
) -> gateway_pb2.AnswerResponse:
    """The ACCEPT serving ``hit`` at ``score``.

    Raises:
        StageError: an invariant does not hold (a gateway error: the caller falls back).
    """
    verification = hit.verification
    if not score.confidence >= score.threshold or serving_problem(hit, policy):
        raise StageError("gateway", FailureKind.ERROR, "an ACCEPT failed its own invariants")
    evidence = "verified" if verification.verdict == _VERIFIED else "self_evidenced"
    chunks = {chunk.id: chunk for chunk in hit.entry.chunks}
    served = {
        "kb_entry_id": hit.entry.id,
        "answer_sha256": verification.answer_sha256,
        "entry_sha256": verification.entry_sha256,
        "kb_version": kb_version,
        "evidence_policy": evidence,
        "checker_version": verification.checker_version,
        "verified_at": verification.verified_at,
        "entailed_chunk_ids": list(verification.entailed_chunk_ids),
        "signed_by": hit.served.key_id,
    }
    trace.detail["served"] = served
    return gateway_pb2.AnswerResponse(
        decision=common_pb2.DECISION_ACCEPT,
        answer=hit.entry.answer,
        kb_entry_id=hit.entry.id,
        confidence=score.confidence,
        threshold=score.threshold,
        evidence=[
            gateway_pb2.Evidence(
                chunk_id=chunk_id,
                text=chunks[chunk_id].text,
                p_entail=verification.chunk_p_entail.get(chunk_id, 0.0),
            )
            for chunk_id in verification.entailed_chunk_ids
        ],
        answer_sha256=verification.answer_sha256,
        entry_sha256=verification.entry_sha256,
        kb_version=kb_version,
        evidence_policy=evidence,
        checker_version=verification.checker_version,
    )
