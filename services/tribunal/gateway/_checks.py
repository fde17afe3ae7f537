"""The gateway's own checks of every stage reply: stages advise, the gateway decides.

A reply is used only when it is consistent with the request it answers and with
itself, and every number in it lies in its declared range; anything else raises
:class:`StageError` (MALFORMED), which the pipeline turns into a FALLBACK with
the stage named and an audit row.

- **Retrieval**: the request id echoed; ranks 1..n in order; entry ids unique;
  the fused score equal to reciprocal rank fusion of the reported ranks
  (Σ 1/(k + rank)); the dense cosine in [-1, 1]; BM25 in [0, (k1 + 1) ·
  ln(2·2³¹ + 2) · words in the query] (Lucene's idf is at most ln(2N + 2), the
  saturated term frequency below k1 + 1); a known verification verdict whose
  answer sha256 matches the answer text as returned; a VERIFIED entry naming
  entailing chunks it has; a SELF_EVIDENCED entry that really has no
  supporting documents.
- **Ensemble**: the request id and every item id echoed in order (one result per
  candidate); P(match) and every judge's P(yes) in [0, 1]; ``match`` equal to
  ``p_match >= threshold``.
- **Confidence**: the request id and item ids echoed; and the reply equal to what
  the calibrator the gateway trusts gives for the same signals — confidence,
  decision, threshold, calibrator version and α. The gateway loads the same
  calibrator artifact as the confidence service (``confidence.artifact_path``,
  or the profile's), so a reply naming another version or threshold, a decision
  outside the enum, or an ACCEPT below the threshold never passes.

Whether an entry may be served at all is not a malformed reply but the KB's
state (:func:`serving_problem`): only a VERIFIED entry checked by the checker
version the gateway is configured with, or a SELF_EVIDENCED one.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..confidence import ConfidenceScorer, ScoreResult
from ..confidence._proto import signals_from_proto
from ..core import TribunalError
from ..entailment import checker_version
from ..kb import answer_sha256, chunks_cut_from_answer
from ..retrieval import TrustedKeys, trusted_keys
from ..v1 import common_pb2, confidence_pb2, ensemble_pb2, retrieval_pb2
from ._provenance import ProvenanceMemory
from ._stages import FailureKind, StageError

if TYPE_CHECKING:
    from ..core import Settings

__all__ = [
    "AnswerPolicy",
    "bm25_bound",
    "check_matches",
    "check_scores",
    "check_search",
    "expected_scores",
    "serving_problem",
]

_MAX_UNITS = 2**31
"""Bound on the search units of one collection (BM25's N) used for the idf bound."""
_COSINE_SLACK = 1e-3  # float32 inner products of unit vectors may pass 1 by rounding
_TOLERANCE = 1e-9
_WORD = re.compile(r"\w+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_VERDICTS = frozenset(retrieval_pb2.VerificationVerdict.values()) - {
    retrieval_pb2.VERIFICATION_VERDICT_UNSPECIFIED
}
_DECISIONS = {
    "accept": common_pb2.DECISION_ACCEPT,
    "escalate": common_pb2.DECISION_ESCALATE,
    "fallback": common_pb2.DECISION_FALLBACK,
}


@dataclass(frozen=True)
class AnswerPolicy:
    """What the gateway trusts: its calibrator, its checker version, the signal ranges."""

    scorer: ConfidenceScorer
    """The calibrator artifact the confidence service is configured to load, with the
    same α / plain threshold / escalate band: the reply must equal its verdict."""
    checker_version: str
    """Entailment checker version a VERIFIED entry must have been checked by."""
    rrf_k: int
    """Reciprocal rank fusion constant of the retrieval service."""
    bm25_k1: float
    """BM25 term-frequency saturation of the retrieval service."""
    trusted_keys: TrustedKeys | None = None
    """The KB writer's public keys: only entries whose served record one of them signed
    are served (None: none trusted, nothing is served)."""
    memory: ProvenanceMemory = field(default_factory=ProvenanceMemory)
    """The newest signed versions seen (an older one later is a replay)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> AnswerPolicy:
        return cls(
            scorer=ConfidenceScorer.from_settings(settings),
            checker_version=checker_version(settings),
            rrf_k=settings.retrieval.rrf_k,
            bm25_k1=settings.retrieval.bm25_k1,
            trusted_keys=trusted_keys(settings),
        )

    @property
    def calibrator_version(self) -> str:
        return self.scorer.version


def _malformed(stage: str, message: str) -> StageError:
    return StageError(stage, FailureKind.MALFORMED, message)


def _finite_in(value: float, low: float, high: float) -> bool:
    return isinstance(value, float | int) and math.isfinite(value) and low <= value <= high


def bm25_bound(query: str, k1: float) -> float:
    """Largest BM25 score any unit can get for ``query`` (every word a query term)."""
    words = max(1, len(_WORD.findall(query)))
    return (k1 + 1.0) * math.log(2.0 * _MAX_UNITS + 2.0) * words


# -- retrieval ---------------------------------------------------------------------------


def check_search(
    response: retrieval_pb2.SearchResponse,
    *,
    request_id: str,
    query: str,
    policy: AnswerPolicy,
) -> list[retrieval_pb2.SearchHit]:
    """The hits of a hybrid, unreranked search, checked; raises MALFORMED otherwise."""
    stage = "retrieval"
    if response.request_id != request_id:
        raise _malformed(stage, f"reply for request {response.request_id!r}, not {request_id!r}")
    if response.kb_version < 0:
        raise _malformed(stage, f"kb_version {response.kb_version} is negative")
    hits = list(response.hits)
    seen: set[str] = set()
    bound = bm25_bound(query, policy.bm25_k1)
    previous = math.inf
    for position, hit in enumerate(hits, start=1):
        entry = hit.entry
        where = f"hit {position} ({entry.id!r})"
        if not entry.id or entry.id in seen:
            raise _malformed(stage, f"{where}: entry id missing or repeated")
        seen.add(entry.id)
        if hit.rank != position:
            raise _malformed(stage, f"{where}: rank {hit.rank} at position {position}")
        _check_scores_of(hit, where, policy, bound)
        if hit.score > previous + _TOLERANCE:
            raise _malformed(stage, f"{where}: scores are not in descending order")
        previous = hit.score
        _check_verification(hit, where)
    votes = sum(hit.neighbour_vote for hit in hits if hit.HasField("neighbour_vote"))
    if votes > 1.0 + _TOLERANCE:
        # Shares of one query's nearest units: together at most all of them.
        raise _malformed(stage, f"neighbour votes sum to {votes:.6g}, more than 1")
    return hits


def _check_scores_of(
    hit: retrieval_pb2.SearchHit, where: str, policy: AnswerPolicy, bm25_max: float
) -> None:
    stage = "retrieval"
    k = policy.rrf_k
    fused = 0.0
    for name in ("dense", "sparse"):
        has_score, has_rank = hit.HasField(f"{name}_score"), hit.HasField(f"{name}_rank")
        if has_score != has_rank:
            raise _malformed(stage, f"{where}: {name} score and rank must come together")
        if has_rank:
            rank = getattr(hit, f"{name}_rank")
            if rank < 1:
                raise _malformed(stage, f"{where}: {name}_rank {rank} < 1")
            fused += 1.0 / (k + rank)
    if not fused:
        raise _malformed(stage, f"{where}: ranked by neither retriever")
    if hit.HasField("rerank_score"):
        raise _malformed(stage, f"{where}: reranked, but the gateway asked for no rerank")
    if not _finite_in(hit.score, 0.0, 2.0 / (k + 1)) or abs(hit.score - fused) > _TOLERANCE:
        raise _malformed(
            stage, f"{where}: fused score {hit.score!r} is not RRF of its ranks ({fused:.6g})"
        )
    if hit.HasField("dense_score") and not _finite_in(
        hit.dense_score, -1.0 - _COSINE_SLACK, 1.0 + _COSINE_SLACK
    ):
        raise _malformed(stage, f"{where}: dense cosine {hit.dense_score!r} not in [-1, 1]")
    if hit.HasField("neighbour_vote") and not _finite_in(hit.neighbour_vote, 0.0, 1.0 + _TOLERANCE):
        raise _malformed(stage, f"{where}: neighbour vote {hit.neighbour_vote!r} not in [0, 1]")
    if hit.HasField("sparse_score") and not _finite_in(hit.sparse_score, 0.0, bm25_max):
        raise _malformed(
            stage, f"{where}: BM25 {hit.sparse_score!r} not in [0, {bm25_max:.1f}] for this query"
        )


def _check_verification(hit: retrieval_pb2.SearchHit, where: str) -> None:
    stage = "retrieval"
    if not hit.HasField("verification"):
        raise _malformed(stage, f"{where}: no verification")
    verification = hit.verification
    verdict = verification.verdict
    if verdict not in _VERDICTS:
        raise _malformed(stage, f"{where}: unknown verification verdict {verdict}")
    if not _SHA256.fullmatch(verification.answer_sha256):
        raise _malformed(stage, f"{where}: answer_sha256 {verification.answer_sha256!r}")
    if answer_sha256(hit.entry.answer) != verification.answer_sha256:
        raise _malformed(stage, f"{where}: the answer text does not hash to its stored sha256")
    _check_entailed(hit, where)
    if verdict == retrieval_pb2.VERIFICATION_VERDICT_SELF_EVIDENCED and not chunks_cut_from_answer(
        hit.entry.answer, tuple(chunk.text for chunk in hit.entry.chunks)
    ):
        raise _malformed(stage, f"{where}: SELF_EVIDENCED, but it has supporting documents")


def _check_entailed(hit: retrieval_pb2.SearchHit, where: str) -> None:
    """The chunks a verification says entail the answer are the entry's own, once each."""
    verification = hit.verification
    verdict = verification.verdict
    entailed = list(verification.entailed_chunk_ids)
    held = {chunk.id for chunk in hit.entry.chunks} >= set(entailed)
    unique = len(set(entailed)) == len(entailed)
    if verdict == retrieval_pb2.VERIFICATION_VERDICT_VERIFIED:
        if not entailed or not held or not unique:
            raise _malformed("retrieval", f"{where}: VERIFIED without entailing chunks it holds")
        if not verification.checker_version:
            raise _malformed("retrieval", f"{where}: VERIFIED without a checker version")
    elif verdict == retrieval_pb2.VERIFICATION_VERDICT_FAILED:
        # Some claims can be entailed and the entry still fail on another: it lists the
        # chunks that entailed something (never served either way).
        if not held or not unique:
            raise _malformed("retrieval", f"{where}: FAILED listing chunks it does not hold")
    elif entailed:
        raise _malformed(
            "retrieval", f"{where}: entailing chunks on a verdict that checked nothing"
        )
    for chunk_id, p in verification.chunk_p_entail.items():
        if chunk_id not in entailed or not _finite_in(p, 0.0, 1.0):
            raise _malformed("retrieval", f"{where}: chunk_p_entail[{chunk_id!r}] = {p!r}")


def serving_problem(hit: retrieval_pb2.SearchHit, policy: AnswerPolicy) -> str | None:
    """Why this (checked) hit may not be served; None when it may."""
    verification = hit.verification
    verdict = verification.verdict
    if verdict == retrieval_pb2.VERIFICATION_VERDICT_SELF_EVIDENCED:
        return None
    if verdict == retrieval_pb2.VERIFICATION_VERDICT_VERIFIED:
        if verification.checker_version != policy.checker_version:
            return (
                f"verified by checker {verification.checker_version}, not the configured "
                f"{policy.checker_version} (run `tribunal kb verify`)"
            )
        return None
    name = retrieval_pb2.VerificationVerdict.Name(verdict).removeprefix("VERIFICATION_VERDICT_")
    return f"{name}: {verification.reason}" if verification.reason else name


# -- ensemble ----------------------------------------------------------------------------


def check_matches(
    response: ensemble_pb2.BatchMatchResponse, *, request_id: str, item_ids: Sequence[str]
) -> list[ensemble_pb2.MatchResponse]:
    """One consistent result per candidate, in order; raises MALFORMED otherwise."""
    stage = "ensemble"
    if response.request_id != request_id:
        raise _malformed(stage, f"reply for request {response.request_id!r}, not {request_id!r}")
    results = list(response.results)
    if [r.item_id for r in results] != list(item_ids):
        raise _malformed(
            stage,
            f"results for items {[r.item_id for r in results]}, asked {list(item_ids)}",
        )
    for result in results:
        where = f"item {result.item_id!r}"
        if not _finite_in(result.p_match, 0.0, 1.0):
            raise _malformed(stage, f"{where}: p_match = {result.p_match!r} is not in [0, 1]")
        if not result.HasField("threshold") or not _finite_in(result.threshold, 0.0, 1.0):
            raise _malformed(stage, f"{where}: no decision threshold in [0, 1]")
        if abs(result.p_match - result.threshold) > _TOLERANCE and result.match != (
            result.p_match >= result.threshold
        ):
            raise _malformed(
                stage,
                f"{where}: match={result.match} contradicts p_match {result.p_match:.4f} "
                f"against threshold {result.threshold:.4f}",
            )
        names = [judge.judge for judge in result.judges]
        if any(not name for name in names) or len(set(names)) != len(names):
            raise _malformed(stage, f"{where}: judge names missing or repeated")
        for judge in result.judges:
            if not _finite_in(judge.p_yes, 0.0, 1.0):
                raise _malformed(stage, f"{where}: judges[{judge.judge}].p_yes = {judge.p_yes!r}")
    return results


# -- confidence --------------------------------------------------------------------------


def expected_scores(
    policy: AnswerPolicy, signals: Sequence[confidence_pb2.Signals]
) -> list[ScoreResult]:
    """What the trusted calibrator gives for these signals (the gateway's own verdict).

    Raises:
        StageError: the calibrator cannot score them (a configuration mismatch with the
            stages: an ERROR of the confidence stage, never an ACCEPT).
    """
    try:
        return policy.scorer.score_many([signals_from_proto(s) for s in signals])
    except TribunalError as exc:
        raise StageError(
            "confidence", FailureKind.ERROR, f"the trusted calibrator refuses the signals: {exc}"
        ) from exc


def check_scores(
    response: confidence_pb2.BatchScoreResponse,
    *,
    request_id: str,
    item_ids: Sequence[str],
    expected: Sequence[ScoreResult],
) -> list[confidence_pb2.ScoreResponse]:
    """The reply, item by item equal to the trusted calibrator's verdict; else MALFORMED."""
    stage = "confidence"
    if response.request_id != request_id:
        raise _malformed(stage, f"reply for request {response.request_id!r}, not {request_id!r}")
    scores = list(response.results)
    if [s.item_id for s in scores] != list(item_ids):
        raise _malformed(
            stage, f"scores for items {[s.item_id for s in scores]}, asked {list(item_ids)}"
        )
    for score, own in zip(scores, expected, strict=True):
        where = f"item {score.item_id!r}"
        if score.decision not in _DECISIONS.values():
            raise _malformed(stage, f"{where}: decision {score.decision} is not in the enum")
        if not _finite_in(score.confidence, 0.0, 1.0):
            raise _malformed(stage, f"{where}: confidence {score.confidence!r} not in [0, 1]")
        if score.calibrator_version != own.calibrator_version:
            raise _malformed(
                stage,
                f"{where}: calibrator {score.calibrator_version!r}, the gateway trusts "
                f"{own.calibrator_version!r}",
            )
        if not _same(score.threshold, own.threshold) or not _same(score.alpha, own.alpha):
            raise _malformed(
                stage,
                f"{where}: threshold {score.threshold!r} / alpha {score.alpha!r}; calibrator "
                f"{own.calibrator_version} has {own.threshold!r} / {own.alpha!r}",
            )
        if abs(score.confidence - own.confidence) > 1e-9:
            raise _malformed(
                stage,
                f"{where}: confidence {score.confidence!r}; the calibrator gives "
                f"{own.confidence!r} for these signals",
            )
        if score.decision != _DECISIONS[own.decision.value]:
            raise _malformed(
                stage,
                f"{where}: decision {common_pb2.Decision.Name(score.decision)} at confidence "
                f"{own.confidence:.4f}, threshold {own.threshold!r}",
            )
    return scores


def _same(reported: float, own: float) -> bool:
    if math.isinf(own):
        return reported == own
    return math.isfinite(reported) and abs(reported - own) <= _TOLERANCE
