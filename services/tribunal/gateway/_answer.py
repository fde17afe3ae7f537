"""``Gateway.Answer``: retrieve → keep servable candidates → match → score → decide.

The gateway decides; stages advise. Every reply is checked (:mod:`._checks`):
consistent with the request it answers and with itself, every signal inside
its declared range, the confidence reply equal to the verdict of the
calibrator the gateway trusts. An entry is a candidate only when its stored
verification is current: VERIFIED by the entailment checker version the
gateway is configured with (its supporting chunks were checked once, when it
was written: no entailment call is made per query), or SELF_EVIDENCED under
its collection's explicit policy; and its answer text hashes to the stored
sha256. ACCEPT is the gateway's own conclusion: confidence at or above the
trusted threshold for such an entry.

:meth:`AnswerPipeline.validate` raises :class:`InvalidArgumentError` (the
caller's mistake: an error status, no decision); everything else ends in a
decision written to the audit store — a stage problem (error, timeout,
malformed or inconsistent reply) is FALLBACK with the stage named, and even an
unexpected failure inside the gateway is a FALLBACK with an audit row, never
an error status.
"""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Sequence
from typing import Any

from ..confidence import RequestVersions, ScoreResult
from ..core import (
    FailedPreconditionError,
    GatewaySettings,
    InvalidArgumentError,
    NotFoundError,
    TribunalError,
    python_turn,
)
from ..core.storage import Database
from ..v1 import confidence_pb2, ensemble_pb2, gateway_pb2, retrieval_pb2
from ._answer_record import (
    audit_signals,
    decision_name,
    reason_name,
    write_decision,
)
from ._candidates import (
    CandidateSignals,
    candidate_signals,
    kb_versions,
    request_versions,
    without_own_phrasing,
)
from ._checks import (
    AnswerPolicy,
    check_matches,
    check_scores,
    check_search,
    expected_scores,
    serving_problem,
)
from ._decision import decide, fallback_response
from ._live_audit import LiveAudit
from ._metrics import record_decision
from ._provenance import check_provenance
from ._stages import Deadline, FailureKind, StageError, StageTransport, call_stage
from ._trace import RequestTrace

__all__ = ["ANSWER_STAGES", "AnswerPipeline", "CandidateSignals"]

ANSWER_STAGES = ("retrieval", "ensemble", "confidence")
"""The stages ``Answer`` calls: no entailment (evidence is checked when an entry is
written) and no debate."""

log = logging.getLogger(__name__)

_REASONS = {
    FailureKind.ERROR: gateway_pb2.FALLBACK_REASON_STAGE_ERROR,
    FailureKind.TIMEOUT: gateway_pb2.FALLBACK_REASON_STAGE_TIMEOUT,
    FailureKind.MALFORMED: gateway_pb2.FALLBACK_REASON_MALFORMED_RESPONSE,
}


class AnswerPipeline:
    """Online matching with fail-closed decisions; thread-safe.

    Args:
        settings: Limits, deadlines, retries, fallback text.
        transport: How the stages are reached.
        store: Where every decision is written (None: not audited).
        policy: What the gateway trusts (calibrator, checker version, signal ranges).
        max_id_chars: Longest collection name and request id (``server.max_id_chars``,
            the limit every gRPC server applies to ids).
        audit: Live audits: the audit coin per decision and the collection's safe mode
            (None: off).
    """

    def __init__(
        self,
        settings: GatewaySettings,
        transport: StageTransport,
        *,
        store: Database | None,
        policy: AnswerPolicy,
        max_id_chars: int,
        audit: LiveAudit | None = None,
    ) -> None:
        self.settings = settings
        self.max_id_chars = max_id_chars
        self.transport = transport
        self.store = store
        self.policy = policy
        self.audit = audit
        self._warned: set[str] = set()

    def _warn_once(self, what: str, why: str) -> None:
        """Log a configured state (the same for every request until an operator acts) once
        per distinct reason, not once per request; every decision still records it."""
        if why in self._warned or len(self._warned) >= 64:
            return
        self._warned.add(why)
        log.warning(what, extra={"why": why})

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
        for field, value in (
            ("collection", request.collection),
            ("request_id", request.request_id),
        ):
            if len(value) > self.max_id_chars:
                raise InvalidArgumentError(
                    f"{field} has {len(value)} characters; the limit is {self.max_id_chars} "
                    "(server.max_id_chars): shorten it",
                    field=field,
                )

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
        # Stage replies must echo this (not the caller's id, which a caller may reuse).
        call_id = uuid.uuid4().hex
        budget = self.settings.deadline_s if deadline_s is None else deadline_s
        deadline = Deadline(min(budget, self.settings.deadline_s))
        try:
            response = self._run(trace, deadline, call_id)
        except StageError as failure:
            log.warning("answer fell back", extra={"stage": failure.stage, "why": str(failure)})
            response = self._fallback(
                trace, _REASONS[failure.kind], stage=failure.stage, error=failure.message
            )
        except (InvalidArgumentError, NotFoundError):
            raise  # the caller's mistake, reported by retrieval: an error status, no decision
        except Exception as exc:  # a gateway bug must still end in an audited fallback
            log.exception("answer failed inside the gateway")
            response = self._fallback(
                trace,
                gateway_pb2.FALLBACK_REASON_STAGE_ERROR,
                stage="gateway",
                error=f"{type(exc).__name__}: {exc}",
            )
        return self._audited(trace, response)

    def _run(
        self, trace: RequestTrace, deadline: Deadline, call_id: str
    ) -> gateway_pb2.AnswerResponse:
        hits, kb_version, unsigned = self._retrieve(trace, deadline, call_id)
        if not hits:
            return self._fallback(trace, gateway_pb2.FALLBACK_REASON_NO_CANDIDATE)
        with python_turn():
            candidates = self._servable(trace, hits, unsigned)
        if not candidates:
            return self._fallback(trace, gateway_pb2.FALLBACK_REASON_UNVERIFIED)
        matches = self._match(trace, deadline, call_id, candidates)
        with python_turn():
            signals = candidate_signals(candidates, matches)
            versions = request_versions(trace, matches, self.settings.candidates)
        try:
            self.policy.scorer.check_versions(versions, strict=True)
        except FailedPreconditionError as exc:
            # Calibrated on another KB version, matcher or retrieval model: nothing here is
            # certified.
            audit_signals(trace, candidates, signals, None)
            self._warn_once("calibrator bound elsewhere", exc.message)
            return self._fallback(
                trace, gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD, error=exc.message
            )
        if not self.policy.scorer.accepts_anything:
            # A configured state, known before scoring: the trusted calibrator certified no
            # threshold for alpha. The gateway's own confidences are audited; nothing is asked.
            own = expected_scores(self.policy, signals)
            audit_signals(trace, candidates, signals, own)
            response = self._fallback(trace, gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD)
            response.confidence = max(score.confidence for score in own)
            return response
        scores = self._score(trace, deadline, call_id, candidates, signals, versions=versions)
        return decide(
            trace,
            candidates,
            signals,
            scores,
            kb_version,
            settings=self.settings,
            policy=self.policy,
            audit=self.audit,
        )

    def candidate_signals(
        self,
        request: gateway_pb2.AnswerRequest,
        *,
        deadline_s: float | None = None,
        leave_out_own_phrasing: bool = False,
    ) -> CandidateSignals:
        """Retrieve and match as :meth:`answer` does, and return what it would send to the
        confidence service; nothing is scored, decided or audited (``tribunal calibrate``).
        ``leave_out_own_phrasing``: retrieval and the matcher pass over the entries' added
        phrasings with the query's words (a query a tune taught, observed as a new one).

        Raises:
            InvalidArgumentError, NotFoundError: the request is the caller's mistake.
            StageError: a stage failed.
        """
        self.validate(request)
        trace = RequestTrace(
            kind="answer",
            request_id=request.request_id or uuid.uuid4().hex,
            query=request.query,
            collection=request.collection or self.settings.collection,
        )
        call_id = uuid.uuid4().hex
        deadline = Deadline(self.settings.deadline_s if deadline_s is None else deadline_s)
        hits, _, unsigned = self._retrieve(
            trace, deadline, call_id, leave_out_own_phrasing=leave_out_own_phrasing
        )
        candidates = self._servable(trace, hits, unsigned) if hits else []
        if not candidates:
            return CandidateSignals((), (), kb_versions(trace))
        if leave_out_own_phrasing:
            candidates = [without_own_phrasing(hit, request.query) for hit in candidates]
        matches = self._match(trace, deadline, call_id, candidates)
        return CandidateSignals(
            tuple(hit.entry.id for hit in candidates),
            tuple(candidate_signals(candidates, matches)),
            request_versions(trace, matches, self.settings.candidates),
        )

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

    def _retrieve(
        self,
        trace: RequestTrace,
        deadline: Deadline,
        call_id: str,
        *,
        leave_out_own_phrasing: bool = False,
    ) -> tuple[list[retrieval_pb2.SearchHit], int, dict[str, str]]:
        """The checked hits, the signed collection version they come from, and why hits
        without a trusted signature may not be served."""
        timeout = deadline.budget(
            "retrieval",
            ["verify", "confidence"],
            self.settings.stage_share,
            self.settings.stage_timeout_s.get("retrieval", math.inf),
        )
        request = retrieval_pb2.SearchRequest(
            collection=trace.collection,
            query=trace.query,
            top_k=self.settings.top_k,
            request_id=call_id,
            leave_out_own_phrasing=leave_out_own_phrasing,
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
        if not isinstance(response, retrieval_pb2.SearchResponse):
            raise StageError("retrieval", FailureKind.MALFORMED, "not a SearchResponse")
        with python_turn():
            hits = check_search(response, request_id=call_id, query=trace.query, policy=self.policy)
            trace.candidate_ids = [hit.entry.id for hit in hits]
            head, unsigned = check_provenance(
                response,
                hits,
                collection=trace.collection,
                keys=self.policy.trusted_keys,
                memory=self.policy.memory,
            )
        if head is None:
            # Nothing is servable; the reply's own (unsigned) version is recorded.
            trace.versions["kb"] = {"collection": trace.collection, "version": response.kb_version}
            if response.kb_content_version:
                trace.versions["kb"]["content"] = response.kb_content_version
            _record_retrieval_model(trace, response)
            return hits, response.kb_version, unsigned
        trace.versions["kb"] = {
            "collection": trace.collection,
            "version": head.kb_version,
            "content": head.kb_content_version,
            "key_id": head.key_id,
        }
        _record_retrieval_model(trace, response)
        return hits, head.kb_version, unsigned

    def _servable(
        self,
        trace: RequestTrace,
        hits: Sequence[retrieval_pb2.SearchHit],
        unsigned: dict[str, str],
    ) -> list[retrieval_pb2.SearchHit]:
        """The best ``candidates`` hits the KB's writer signed whose stored verification
        is current."""
        kept: list[retrieval_pb2.SearchHit] = []
        refused: dict[str, str] = {}
        for hit in hits:
            problem = unsigned.get(hit.entry.id) or serving_problem(hit, self.policy)
            if problem is None:
                kept.append(hit)
            else:
                refused[hit.entry.id] = problem
        if refused:
            trace.detail["not_served"] = refused
        return kept[: self.settings.candidates]

    def _match(
        self,
        trace: RequestTrace,
        deadline: Deadline,
        call_id: str,
        candidates: Sequence[retrieval_pb2.SearchHit],
    ) -> list[ensemble_pb2.MatchResponse]:
        """The ensemble judges whether each candidate answers the query (no entailment:
        the candidates' evidence was verified when they were written)."""
        timeout = deadline.budget(
            "verify",
            ["confidence"],
            self.settings.stage_share,
            self.settings.stage_timeout_s.get("ensemble", math.inf),
        )
        item_ids = [hit.entry.id for hit in candidates]
        request = ensemble_pb2.BatchMatchRequest(
            request_id=call_id,
            items=[
                ensemble_pb2.MatchRequest(query=trace.query, candidate=hit.entry, item_id=item)
                for hit, item in zip(candidates, item_ids, strict=True)
            ],
        )
        with trace.stage("ensemble"):
            response = self._call("ensemble", "BatchMatch", request, timeout)
        if not isinstance(response, ensemble_pb2.BatchMatchResponse):
            raise StageError("ensemble", FailureKind.MALFORMED, "not a BatchMatchResponse")
        matches = check_matches(response, request_id=call_id, item_ids=item_ids)
        first = matches[0]
        trace.versions["ensemble"] = {
            "aggregator": first.aggregator,
            "artifact": first.artifact_version,
            "judges": {j.judge: {"model": j.model, "prompt": j.prompt} for j in first.judges},
        }
        return matches

    def _score(
        self,
        trace: RequestTrace,
        deadline: Deadline,
        call_id: str,
        candidates: Sequence[retrieval_pb2.SearchHit],
        signals: Sequence[confidence_pb2.Signals],
        *,
        versions: RequestVersions,
    ) -> list[ScoreResult]:
        """The confidence service's verdicts, each equal to the trusted calibrator's."""
        timeout = deadline.budget(
            "confidence",
            [],
            self.settings.stage_share,
            self.settings.stage_timeout_s.get("confidence", math.inf),
        )
        item_ids = [hit.entry.id for hit in candidates]
        request = confidence_pb2.BatchScoreRequest(
            request_id=call_id,
            items=[
                confidence_pb2.ScoreRequest(
                    signals=s,
                    item_id=item,
                    kb_content_version=versions.collection_version,
                    matcher_version=versions.matcher,
                    retrieval_model=versions.retrieval_model,
                )
                for s, item in zip(signals, item_ids, strict=True)
            ],
        )
        with trace.stage("confidence"):
            response = self._call("confidence", "BatchScore", request, timeout)
        if not isinstance(response, confidence_pb2.BatchScoreResponse):
            raise StageError("confidence", FailureKind.MALFORMED, "not a BatchScoreResponse")
        with python_turn():
            expected = expected_scores(self.policy, signals)
            check_scores(response, request_id=call_id, item_ids=item_ids, expected=expected)
        trace.versions["confidence"] = {
            "calibrator": expected[0].calibrator_version,
            "alpha": expected[0].alpha,
        }
        return expected

    def _fallback(
        self,
        trace: RequestTrace,
        reason: int,
        *,
        stage: str = "",
        error: str = "",
    ) -> gateway_pb2.AnswerResponse:
        return fallback_response(self.settings, trace, reason, stage=stage, error=error)

    def _audited(
        self, trace: RequestTrace, response: gateway_pb2.AnswerResponse
    ) -> gateway_pb2.AnswerResponse:
        """Write the decision; if that fails, nothing unaudited is accepted."""
        try:
            response.audit_id = (
                write_decision(self.store, self.audit, trace, response) if self.store else ""
            )
        except TribunalError as exc:
            log.error("audit write failed; falling back", extra={"why": str(exc)})
            response = self._fallback(
                trace, gateway_pb2.FALLBACK_REASON_STAGE_ERROR, stage="audit", error=str(exc)
            )
        response.request_id = trace.request_id
        response.latencies.extend(trace.latency_messages())
        record_decision(
            "answer", decision_name(response), reason_name(response), trace.latencies_ms
        )
        return response


def _record_retrieval_model(trace: RequestTrace, response: retrieval_pb2.SearchResponse) -> None:
    """The model whose vectors the KB's dense search compared, beside the KB's versions:
    the calibrator is bound to it (absent: retrieval did not report one)."""
    if response.retrieval_model:
        trace.versions["kb"]["retrieval_model"] = response.retrieval_model
