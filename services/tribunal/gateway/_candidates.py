"""A query's candidates as the confidence service sees them: signals, margins, versions.

Two candidates are the same answer when they share an answer class or an answer text;
a candidate's margin is over candidates that give another answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..confidence import RequestVersions
from ..kb import phrasing_key
from ..v1 import confidence_pb2, ensemble_pb2, retrieval_pb2
from ._trace import RequestTrace

__all__ = [
    "ANSWER_CLASS_KEY",
    "CandidateSignals",
    "answer_key",
    "candidate_signals",
    "kb_versions",
    "request_versions",
    "without_own_phrasing",
]

_VERIFIED = retrieval_pb2.VERIFICATION_VERDICT_VERIFIED


@dataclass(frozen=True)
class CandidateSignals:
    """What the gateway sends to the confidence service for one query, before scoring."""

    entry_ids: tuple[str, ...]
    """The servable candidates, best retrieval rank first."""
    signals: tuple[confidence_pb2.Signals, ...]
    versions: RequestVersions
    """The KB content version and retrieval model retrieval reported, and the matcher that
    matched."""


ANSWER_CLASS_KEY = "answer_class"
"""Entry metadata naming the entry's answer class: entries with the same value are one
answer (e.g. the reviewed classes of ``tribunal answer-classes build``)."""


def answer_key(hit: retrieval_pb2.SearchHit) -> str:
    """What makes two candidates the same answer: the same ``answer_class`` metadata, or
    else the same answer text, case and spacing aside (two entries serving one answer —
    an FAQ question filed twice, or once per phrasing — are one answer, not rivals)."""
    named = hit.entry.metadata.get(ANSWER_CLASS_KEY, "").strip()
    if named:
        return "class:" + named
    return "text:" + " ".join(hit.entry.answer.split()).casefold()


def without_own_phrasing(hit: retrieval_pb2.SearchHit, query: str) -> retrieval_pb2.SearchHit:
    """``hit`` with the entry's added phrasings that have the query's words left out (the
    entry's question stays): what the matcher sees of a query the KB was not taught, as
    retrieval's ``leave_out_own_phrasing`` leaves it out of the search."""
    key = phrasing_key(query)
    kept = [text for text in hit.entry.questions if phrasing_key(text) != key]
    if len(kept) == len(hit.entry.questions):
        return hit
    copy = retrieval_pb2.SearchHit()
    copy.CopyFrom(hit)
    del copy.entry.questions[:]
    copy.entry.questions.extend(kept)
    return copy


def candidate_signals(
    candidates: Sequence[retrieval_pb2.SearchHit], matches: Sequence[ensemble_pb2.MatchResponse]
) -> list[confidence_pb2.Signals]:
    """Each candidate's signals, with its P(match) margin over the query's candidates that
    give *another answer* (how clearly it beats the alternatives; absent when no candidate
    gives another answer) and its answer's neighbour vote (the votes of the candidates
    that give its answer, summed). Phrasings of one entry are one candidate already;
    candidates with the same answer text are one answer (:func:`answer_key`), so the same
    answer filed twice does not cancel its own margin or split its vote."""
    signals = [_signals(hit, match) for hit, match in zip(candidates, matches, strict=True)]
    keys = [answer_key(hit) for hit in candidates]
    p_match = [match.p_match for match in matches]
    for index, item in enumerate(signals):
        rivals = [p for other, p in enumerate(p_match) if keys[other] != keys[index]]
        if rivals:
            item.ensemble_p_match_margin = p_match[index] - max(rivals)
        votes = [
            hit.neighbour_vote
            for other, hit in enumerate(candidates)
            if keys[other] == keys[index] and hit.HasField("neighbour_vote")
        ]
        if candidates[index].HasField("neighbour_vote"):
            # The answer's share: its entries' votes together (capped: rounding).
            item.neighbour_vote = min(1.0, sum(votes))
    return signals


def _signals(
    hit: retrieval_pb2.SearchHit, match: ensemble_pb2.MatchResponse
) -> confidence_pb2.Signals:
    """What the confidence service sees for one candidate; a signal not measured is absent.

    The entailment signals come from the entry's stored verification (query-independent,
    checked when the entry was written): absent for a self-evidenced entry.
    """
    signals = confidence_pb2.Signals(
        retrieval_score=hit.score,
        retrieval_rank=hit.rank,
        ensemble_p_match=match.p_match,
    )
    if hit.HasField("dense_score"):
        signals.dense_score = hit.dense_score
    if hit.HasField("sparse_score"):
        signals.sparse_score = hit.sparse_score
    for judge in match.judges:
        signals.judge_p_yes[judge.judge] = judge.p_yes
    verification = hit.verification
    if verification.verdict == _VERIFIED and verification.chunk_p_entail:
        signals.entailment_p_entail = max(verification.chunk_p_entail.values())
        signals.supporting_passages = len(verification.entailed_chunk_ids)
    return signals


def kb_versions(trace: RequestTrace) -> RequestVersions:
    """The KB content version and retrieval model retrieval reported (recorded in the
    trace's ``kb`` versions; empty: not reported)."""
    kb = trace.versions.get("kb", {})
    return RequestVersions(
        collection_version=str(kb.get("content", "")),
        retrieval_model=str(kb.get("retrieval_model", "")),
    )


def request_versions(
    trace: RequestTrace, matches: Sequence[ensemble_pb2.MatchResponse], candidates: int
) -> RequestVersions:
    """The KB content version and retrieval model retrieval reported, the matcher that
    matched, and how many candidates this gateway scores."""
    first = matches[0]
    return replace(
        kb_versions(trace),
        matcher=f"{first.aggregator}:{first.artifact_version}",
        candidates=candidates,
    )
