"""``Gateway.Answer``: retrieve → verify (ensemble ‖ entailment) → score → decide.

Steps in the vLLM-entrypoint style, each small and each either returning its
result or raising: :meth:`AnswerPipeline.validate` raises
:class:`InvalidArgumentError` (the caller's mistake: an error status, no
decision); every stage problem raises :class:`StageError`, which
:meth:`AnswerPipeline.answer` turns into FALLBACK with the reason recorded.
Nothing is returned as an answer unless the confidence service said ACCEPT
for that very candidate, and the decision was written to the audit store.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any

from google.protobuf.json_format import MessageToDict

from ..core import GatewaySettings, InvalidArgumentError, NotFoundError, TribunalError
from ..core.storage import Database, DecisionRecord, EscalationRecord
from ..v1 import (
    common_pb2,
    confidence_pb2,
    ensemble_pb2,
    entailment_pb2,
    gateway_pb2,
    retrieval_pb2,
)
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

__all__ = ["AnswerPipeline"]

log = logging.getLogger(__name__)

_REASONS = {
    FailureKind.ERROR: gateway_pb2.FALLBACK_REASON_STAGE_ERROR,
    FailureKind.TIMEOUT: gateway_pb2.FALLBACK_REASON_STAGE_TIMEOUT,
    FailureKind.MALFORMED: gateway_pb2.FALLBACK_REASON_MALFORMED_RESPONSE,
}
_ENTAILED = entailment_pb2.ENTAILMENT_LABEL_ENTAILED


@dataclass(frozen=True)
class _Checked:
    """One candidate's verification: the ensemble's verdict, its chunks' entailment."""

    hit: retrieval_pb2.SearchHit
    match: ensemble_pb2.MatchResponse
    chunks: list[tuple[common_pb2.Chunk, entailment_pb2.EntailmentResult]]


class AnswerPipeline:
    """Online matching with fail-closed decisions; thread-safe."""

    def __init__(
        self,
        settings: GatewaySettings,
        transport: StageTransport,
        *,
        executor: Executor,
        store: Database | None,
        max_hypothesis_chars: int | None = None,
    ) -> None:
        self.settings = settings
        self.transport = transport
        self.executor = executor
        self.store = store
        self.max_hypothesis_chars = max_hypothesis_chars

    # -- steps ---------------------------------------------------------------------------

    def validate(self, request: gateway_pb2.AnswerRequest) -> None:
        if not request.query.strip():
            raise InvalidArgumentError("query is empty: send the user's question", field="query")
        if len(request.query) > self.settings.max_query_chars:
            raise InvalidArgumentError(
                f"query has {len(request.query)} characters; the limit is "
                f"{self.settings.max_query_chars} (gateway.max_query_chars)",
                field="query",
            )
        if len(request.collection) > 128:
            raise InvalidArgumentError("collection name is longer than 128", field="collection")
        if len(request.request_id) > 128:
            raise InvalidArgumentError("request_id is longer than 128", field="request_id")

    def answer(
        self, request: gateway_pb2.AnswerRequest, *, deadline_s: float | None = None
    ) -> gateway_pb2.AnswerResponse:
        """Validate, run the stages, decide, audit. Raises only for the caller's mistakes."""
        self.validate(request)
        trace = RequestTrace(
            kind="answer",
            request_id=request.request_id or uuid.uuid4().hex,
            query=request.query,
            collection=request.collection or self.settings.collection,
        )
        budget = self.settings.deadline_s if deadline_s is None else deadline_s
        deadline = Deadline(min(budget, self.settings.deadline_s))
        try:
            hits = self._retrieve(trace, deadline)
            if not hits:
                response = self._fallback(trace, gateway_pb2.FALLBACK_REASON_NO_CANDIDATE)
            else:
                checked = self._verify(trace, deadline, hits[: self.settings.candidates])
                signals = [_signals(item) for item in checked]
                scores = self._score(trace, deadline, signals)
                response = self._decide(trace, checked, signals, scores)
        except StageError as failure:
            log.warning("answer fell back", extra={"stage": failure.stage, "why": str(failure)})
            response = self._fallback(
                trace, _REASONS[failure.kind], stage=failure.stage, error=failure.message
            )
        return self._audited(trace, response)

    def _call(self, stage: str, method: str, request: Any, timeout_s: float, **kw: Any) -> Any:
        return call_stage(
            self.transport,
            stage,
            method,
            request,
            timeout_s=timeout_s,
            retries=self.settings.retries,
            backoff_s=self.settings.retry_backoff_s,
            **kw,
        )

    def _retrieve(self, trace: RequestTrace, deadline: Deadline) -> list[retrieval_pb2.SearchHit]:
        timeout = deadline.budget(
            "retrieval",
            ["verify", "confidence"],
            self.settings.stage_share,
            self.settings.stage_timeout_s.get("retrieval", math.inf),
        )
        request = retrieval_pb2.SearchRequest(
            collection=trace.collection, query=trace.query, top_k=self.settings.top_k
        )
        with trace.stage("retrieval"):
            # An unknown collection or a query retrieval refuses is the caller's to fix.
            response = self._call(
                "retrieval",
                "Search",
                request,
                timeout,
                propagate=(InvalidArgumentError, NotFoundError),
            )
        hits = list(response.hits)
        for hit in hits:
            if not hit.entry.id or not math.isfinite(hit.score) or hit.rank < 1:
                raise StageError("retrieval", FailureKind.MALFORMED, "a hit lacks id/score/rank")
        trace.candidate_ids = [hit.entry.id for hit in hits]
        return hits

    def _verify(
        self, trace: RequestTrace, deadline: Deadline, hits: Sequence[retrieval_pb2.SearchHit]
    ) -> list[_Checked]:
        """The ensemble and the entailment check run concurrently on every candidate."""
        timeout = deadline.budget("verify", ["confidence"], self.settings.stage_share, math.inf)
        match_request = ensemble_pb2.BatchMatchRequest(
            items=[ensemble_pb2.MatchRequest(query=trace.query, candidate=h.entry) for h in hits]
        )
        # An answer longer than the entailment service accepts as a hypothesis is not
        # checked (its entailment signals stay missing) rather than failing every candidate.
        limit = self.max_hypothesis_chars
        checkable = [limit is None or len(hit.entry.answer) <= limit for hit in hits]
        if not all(checkable):
            trace.detail["entailment_skipped"] = [
                hit.entry.id for hit, ok in zip(hits, checkable, strict=True) if not ok
            ]
        pairs = [
            (i, chunk) for i, hit in enumerate(hits) if checkable[i] for chunk in hit.entry.chunks
        ]
        check_request = entailment_pb2.CheckRequest(
            pairs=[
                entailment_pb2.EntailmentPair(premise=chunk.text, hypothesis=hits[i].entry.answer)
                for i, chunk in pairs
            ]
        )

        def ensemble() -> ensemble_pb2.BatchMatchResponse:
            cap = self.settings.stage_timeout_s.get("ensemble", math.inf)
            with trace.stage("ensemble"):
                response: ensemble_pb2.BatchMatchResponse = self._call(
                    "ensemble", "BatchMatch", match_request, min(timeout, cap)
                )
                return response

        def entailment() -> entailment_pb2.CheckResponse:
            if not pairs:  # no supporting chunks: the signal is missing, not zero
                return entailment_pb2.CheckResponse()
            cap = self.settings.stage_timeout_s.get("entailment", math.inf)
            with trace.stage("entailment"):
                checked: entailment_pb2.CheckResponse = self._call(
                    "entailment", "Check", check_request, min(timeout, cap)
                )
                return checked

        matched = self.executor.submit(ensemble)
        checked = self.executor.submit(entailment)
        # Both finish (or time out) within ``timeout``; the first failure decides.
        matches, checks = matched.result(), checked.result()
        if len(matches.results) != len(hits):
            raise StageError(
                "ensemble",
                FailureKind.MALFORMED,
                f"{len(matches.results)} results for {len(hits)} candidates",
            )
        if len(checks.results) != len(pairs):
            raise StageError(
                "entailment", FailureKind.MALFORMED, f"{len(checks.results)} for {len(pairs)}"
            )
        per_candidate: list[list[tuple[common_pb2.Chunk, entailment_pb2.EntailmentResult]]] = [
            [] for _ in hits
        ]
        for (i, chunk), result in zip(pairs, checks.results, strict=True):
            check_probability("entailment", "p_entail", result.p_entail)
            if result.HasField("p_contradict"):
                check_probability("entailment", "p_contradict", result.p_contradict)
            per_candidate[i].append((chunk, result))
        for match in matches.results:
            check_probability("ensemble", "p_match", match.p_match)
            for judge in match.judges:
                check_probability("ensemble", f"judges[{judge.judge}].p_yes", judge.p_yes)
        first = matches.results[0]
        trace.versions["ensemble"] = {
            "aggregator": first.aggregator,
            "artifact": first.artifact_version,
            "judges": {j.judge: {"model": j.model, "prompt": j.prompt} for j in first.judges},
        }
        models = sorted({r.model for r in checks.results if r.model})
        if models:
            trace.versions["entailment"] = {"models": models}
        return [
            _Checked(hit, match, chunks)
            for hit, match, chunks in zip(hits, matches.results, per_candidate, strict=True)
        ]

    def _score(
        self, trace: RequestTrace, deadline: Deadline, signals: Sequence[confidence_pb2.Signals]
    ) -> list[confidence_pb2.ScoreResponse]:
        timeout = deadline.budget(
            "confidence",
            [],
            self.settings.stage_share,
            self.settings.stage_timeout_s.get("confidence", math.inf),
        )
        request = confidence_pb2.BatchScoreRequest(
            items=[confidence_pb2.ScoreRequest(signals=s) for s in signals]
        )
        with trace.stage("confidence"):
            response = self._call("confidence", "BatchScore", request, timeout)
        scores = list(response.results)
        if len(scores) != len(signals):
            raise StageError(
                "confidence", FailureKind.MALFORMED, f"{len(scores)} scores for {len(signals)}"
            )
        for score in scores:
            check_probability("confidence", "confidence", score.confidence)
            if score.decision == common_pb2.DECISION_UNSPECIFIED or not math.isfinite(
                score.threshold
            ):
                raise StageError("confidence", FailureKind.MALFORMED, "no decision/threshold")
        trace.versions["confidence"] = {
            "calibrator": scores[0].calibrator_version,
            "alpha": scores[0].alpha,
        }
        return scores

    def _decide(
        self,
        trace: RequestTrace,
        checked: Sequence[_Checked],
        signals: Sequence[confidence_pb2.Signals],
        scores: Sequence[confidence_pb2.ScoreResponse],
    ) -> gateway_pb2.AnswerResponse:
        for item, item_signals, score in zip(checked, signals, scores, strict=True):
            trace.signals[item.hit.entry.id] = {
                "signals": MessageToDict(item_signals, preserving_proto_field_name=True),
                "confidence": score.confidence,
                "decision": common_pb2.Decision.Name(score.decision),
            }
        best = max(range(len(checked)), key=lambda i: scores[i].confidence)
        item, score = checked[best], scores[best]
        trace.detail["best_candidate"] = item.hit.entry.id
        if score.decision == common_pb2.DECISION_ACCEPT:
            return gateway_pb2.AnswerResponse(
                decision=common_pb2.DECISION_ACCEPT,
                answer=item.hit.entry.answer,
                kb_entry_id=item.hit.entry.id,
                confidence=score.confidence,
                threshold=score.threshold,
                evidence=[
                    gateway_pb2.Evidence(chunk_id=chunk.id, text=chunk.text, p_entail=r.p_entail)
                    for chunk, r in item.chunks
                    if r.label == _ENTAILED
                ],
            )
        response = self._fallback(trace, gateway_pb2.FALLBACK_REASON_LOW_CONFIDENCE)
        response.confidence = score.confidence
        response.threshold = score.threshold
        if score.decision == common_pb2.DECISION_ESCALATE and self.settings.escalate_to == "human":
            response.decision = common_pb2.DECISION_ESCALATE
            trace.detail["escalate"] = {
                "kb_entry_id": item.hit.entry.id,
                "answer": item.hit.entry.answer,
                "confidence": score.confidence,
            }
        return response

    def _fallback(
        self,
        trace: RequestTrace,
        reason: int,
        *,
        stage: str = "",
        error: str = "",
    ) -> gateway_pb2.AnswerResponse:
        if error:
            trace.detail["error"] = error
        return gateway_pb2.AnswerResponse(
            decision=common_pb2.DECISION_FALLBACK,
            answer=self.settings.fallback_answer,
            fallback_reason=reason,  # type: ignore[arg-type]
            failed_stage=stage,
        )

    def _audited(
        self, trace: RequestTrace, response: gateway_pb2.AnswerResponse
    ) -> gateway_pb2.AnswerResponse:
        """Write the decision; if that fails, nothing unaudited is accepted."""
        try:
            response.audit_id = self._write(trace, response)
        except TribunalError as exc:
            log.error("audit write failed; falling back", extra={"why": str(exc)})
            response = self._fallback(
                trace, gateway_pb2.FALLBACK_REASON_STAGE_ERROR, stage="audit", error=str(exc)
            )
        response.request_id = trace.request_id
        response.latencies.extend(trace.latency_messages())
        record_decision("answer", _decision(response), _reason(response), trace.latencies_ms)
        return response

    def _write(self, trace: RequestTrace, response: gateway_pb2.AnswerResponse) -> str:
        """The audit record (and the escalation, if any); returns the audit id."""
        if self.store is None:
            return ""
        has_confidence = response.HasField("confidence")
        audit_id = self.store.append_decision(
            DecisionRecord(
                kind="answer",
                query=trace.query,
                decision=_decision(response),
                request_id=trace.request_id,
                collection=trace.collection,
                reason=_reason(response),
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
            )
        )
        escalate = trace.detail.get("escalate")
        if escalate is not None:
            self.store.add_escalation(
                EscalationRecord(
                    query=trace.query,
                    chunk=str(escalate["answer"]),
                    reason="low_confidence_match",
                    item_id=trace.request_id,
                    history=escalate,
                    audit_id=audit_id,
                )
            )
        return audit_id


def _decision(response: gateway_pb2.AnswerResponse) -> str:
    return common_pb2.Decision.Name(response.decision).removeprefix("DECISION_")


def _reason(response: gateway_pb2.AnswerResponse) -> str:
    if not response.fallback_reason:
        return ""
    return gateway_pb2.FallbackReason.Name(response.fallback_reason).removeprefix(
        "FALLBACK_REASON_"
    )


def _signals(item: _Checked) -> confidence_pb2.Signals:
    """What the confidence service sees for one candidate; a stage that did not run is absent."""
    hit = item.hit
    signals = confidence_pb2.Signals(
        retrieval_score=hit.score,
        retrieval_rank=hit.rank,
        ensemble_p_match=item.match.p_match,
    )
    if hit.HasField("dense_score"):
        signals.dense_score = hit.dense_score
    if hit.HasField("sparse_score"):
        signals.sparse_score = hit.sparse_score
    for judge in item.match.judges:
        signals.judge_p_yes[judge.judge] = judge.p_yes
    if item.chunks:
        results = [r for _, r in item.chunks]
        signals.entailment_p_entail = max(r.p_entail for r in results)
        contradictions = [r.p_contradict for r in results if r.HasField("p_contradict")]
        if contradictions:
            signals.entailment_p_contradict = max(contradictions)
        signals.supporting_passages = sum(r.label == _ENTAILED for r in results)
    return signals
