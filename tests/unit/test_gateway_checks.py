"""The gateway's reply checks, rule by rule, on hand-built replies (no stage, no model).

The same rules against real stage servers behind a rewriting proxy:
tests/integration/test_gateway_tamper.py.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import pytest
from tribunal.confidence import CalibratorArtifact, ConfidenceScorer
from tribunal.gateway import StageError
from tribunal.gateway._checks import (
    AnswerPolicy,
    bm25_bound,
    check_matches,
    check_scores,
    check_search,
    expected_scores,
    serving_problem,
)
from tribunal.gateway._provenance import ProvenanceMemory
from tribunal.gateway._stages import FailureKind
from tribunal.kb import Chunk, KbEntry, answer_sha256, entry_sha256, entry_to_proto
from tribunal.v1 import common_pb2, confidence_pb2, ensemble_pb2, retrieval_pb2

from tests.integration._scripted_stages import identity_calibrator

CHECKER = "entail-0123456789ab"


@pytest.fixture
def policy(tmp_path: Path) -> AnswerPolicy:
    artifact = CalibratorArtifact.load(identity_calibrator(tmp_path / "identity.json"))
    scorer = ConfidenceScorer(artifact, alpha=0.05, plain_threshold=0.5)
    return AnswerPolicy(scorer=scorer, checker_version=CHECKER, rrf_k=60, bm25_k1=1.5)


def _hit(rank: int, entry_id: str = "", **verification: object) -> retrieval_pb2.SearchHit:
    entry = common_pb2.KbEntry(
        id=entry_id or f"e{rank}",
        question="How long is the incubation period?",
        answer="Up to 14 days.",
        chunks=[common_pb2.Chunk(id="doc-0", text="The incubation period is up to 14 days.")],
    )
    fields: dict[str, object] = {
        "verdict": retrieval_pb2.VERIFICATION_VERDICT_VERIFIED,
        "entailed_chunk_ids": ["doc-0"],
        "checker_version": CHECKER,
        "answer_sha256": answer_sha256(entry.answer),
        **verification,
    }
    return retrieval_pb2.SearchHit(
        entry=entry,
        score=2 / (60 + rank),
        rank=rank,
        dense_score=0.8,
        dense_rank=rank,
        sparse_score=4.0,
        sparse_rank=rank,
        verification=retrieval_pb2.EntryVerification(**fields),  # type: ignore[arg-type]
    )


def _search(*hits: retrieval_pb2.SearchHit) -> retrieval_pb2.SearchResponse:
    return retrieval_pb2.SearchResponse(hits=hits, request_id="r", kb_version=3)


def test_a_consistent_search_reply_passes(policy: AnswerPolicy) -> None:
    hits = check_search(
        _search(_hit(1), _hit(2)), request_id="r", query="incubation?", policy=policy
    )
    assert [h.entry.id for h in hits] == ["e1", "e2"]
    assert serving_problem(hits[0], policy) is None


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"score": 0.5}, "is not RRF of its ranks"),
        ({"sparse_score": 1e300}, "BM25"),
        ({"dense_score": math.nan}, "dense cosine"),
        ({"rank": 3}, "rank 3 at position 1"),
        ({"neighbour_vote": 1.5}, "neighbour vote"),
        ({"neighbour_vote": -0.01}, "neighbour vote"),
    ],
)
def test_scores_outside_their_declared_range_are_malformed(
    policy: AnswerPolicy, change: dict[str, float], message: str
) -> None:
    hit = _hit(1)
    for name, value in change.items():
        setattr(hit, name, value)
    with pytest.raises(StageError, match=message) as raised:
        check_search(_search(hit), request_id="r", query="incubation?", policy=policy)
    assert (raised.value.stage, raised.value.kind) == ("retrieval", FailureKind.MALFORMED)


def test_neighbour_votes_of_one_query_sum_to_at_most_one(policy: AnswerPolicy) -> None:
    first, second = _hit(1), _hit(2)
    first.neighbour_vote, second.neighbour_vote = 0.7, 0.3
    check_search(_search(first, second), request_id="r", query="incubation?", policy=policy)
    second.neighbour_vote = 0.6
    with pytest.raises(StageError, match=r"neighbour votes sum to 1\.3") as raised:
        check_search(_search(first, second), request_id="r", query="incubation?", policy=policy)
    assert raised.value.kind == FailureKind.MALFORMED


def test_bm25_is_bounded_by_the_query_length() -> None:
    assert bm25_bound("who won the cup", 1.5) == pytest.approx(4 * 2.5 * math.log(2 * 2**31 + 2))


def test_verification_must_match_the_answer_and_the_checker(policy: AnswerPolicy) -> None:
    altered = _hit(1)
    altered.entry.answer = "Drink bleach."
    with pytest.raises(StageError, match="does not hash to its stored sha256"):
        check_search(_search(altered), request_id="r", query="q", policy=policy)
    with pytest.raises(StageError, match="unknown verification verdict"):
        check_search(_search(_hit(1, verdict=42)), request_id="r", query="q", policy=policy)
    with pytest.raises(StageError, match="VERIFIED without entailing chunks"):
        check_search(
            _search(_hit(1, entailed_chunk_ids=[])), request_id="r", query="q", policy=policy
        )
    with pytest.raises(StageError, match="reply for request"):
        check_search(_search(_hit(1)), request_id="other", query="q", policy=policy)
    stale = _hit(1, checker_version="entail-ffffffffffff")
    assert "not the configured" in str(serving_problem(stale, policy))
    failed = _hit(
        1,
        verdict=retrieval_pb2.VERIFICATION_VERDICT_FAILED,
        entailed_chunk_ids=[],
        reason="claim 1/1 is contradicted by chunk doc-0",
    )
    assert serving_problem(failed, policy) == "FAILED: claim 1/1 is contradicted by chunk doc-0"
    # A FAILED entry whose other claim a chunk entails: well formed, and still not served.
    partly = _hit(
        1,
        verdict=retrieval_pb2.VERIFICATION_VERDICT_FAILED,
        chunk_p_entail={"doc-0": 0.9},
        reason="claim 2/2 is not entailed by any supporting chunk",
    )
    check_search(_search(partly), request_id="r", query="q", policy=policy)
    assert str(serving_problem(partly, policy)).startswith("FAILED: claim 2/2")
    for verdict, chunks in (
        (retrieval_pb2.VERIFICATION_VERDICT_FAILED, ["doc-9"]),
        (retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED, ["doc-0"]),
    ):
        bad = _search(_hit(1, verdict=verdict, entailed_chunk_ids=chunks))
        with pytest.raises(StageError, match="chunks"):
            check_search(bad, request_id="r", query="q", policy=policy)


def test_match_results_must_echo_their_items_and_agree_with_p_match() -> None:
    def result(item: str, p: float, match: bool) -> ensemble_pb2.MatchResponse:
        return ensemble_pb2.MatchResponse(item_id=item, p_match=p, match=match, threshold=0.5)

    ok = ensemble_pb2.BatchMatchResponse(
        request_id="r", results=[result("a", 0.9, True), result("b", 0.1, False)]
    )
    assert len(check_matches(ok, request_id="r", item_ids=["a", "b"])) == 2
    with pytest.raises(StageError, match="results for items"):
        check_matches(ok, request_id="r", item_ids=["b", "a"])
    contradicting = ensemble_pb2.BatchMatchResponse(
        request_id="r", results=[result("a", 1.0, False)]
    )
    with pytest.raises(StageError, match="contradicts p_match"):
        check_matches(contradicting, request_id="r", item_ids=["a"])


def test_a_score_reply_must_be_what_the_trusted_calibrator_says(policy: AnswerPolicy) -> None:
    signals = [confidence_pb2.Signals(ensemble_p_match=0.2)]
    [own] = expected_scores(policy, signals)
    assert (own.confidence, own.threshold, own.decision.value) == (
        pytest.approx(0.2),
        0.5,
        "fallback",
    )

    def reply(**fields: object) -> confidence_pb2.BatchScoreResponse:
        values: dict[str, object] = {
            "item_id": "a",
            "confidence": own.confidence,
            "decision": common_pb2.DECISION_FALLBACK,
            "threshold": own.threshold,
            "calibrator_version": own.calibrator_version,
            "alpha": own.alpha,
            **fields,
        }
        return confidence_pb2.BatchScoreResponse(
            request_id="r",
            results=[confidence_pb2.ScoreResponse(**values)],  # type: ignore[arg-type]
        )

    check_scores(reply(), request_id="r", item_ids=["a"], expected=[own])
    for fields, message in [
        ({"decision": common_pb2.DECISION_ACCEPT}, "decision DECISION_ACCEPT"),
        ({"decision": 7}, "not in the enum"),
        ({"threshold": -5.0}, "threshold"),
        ({"calibrator_version": "platt-000000000000"}, "the gateway trusts"),
        ({"confidence": 0.99}, "the calibrator gives"),
    ]:
        with pytest.raises(StageError, match=message) as raised:
            check_scores(reply(**fields), request_id="r", item_ids=["a"], expected=[own])
        assert raised.value.kind is FailureKind.MALFORMED


def test_the_served_entry_digest_is_recomputed_for_every_change_of_the_entry() -> None:
    memory = ProvenanceMemory(max_digests=3)
    entry = KbEntry(
        "e1",
        "Q?",
        "A.",
        metadata={"source": "s", "lang": "en"},
        chunks=(Chunk("c0", "text", "T"),),
        questions=("Q2?",),
    )
    assert memory.entry_sha256(entry_to_proto(entry)) == entry_sha256(entry)
    changes = {
        "answer": "A!",
        "question": "Q",
        "metadata": {"source": "s"},
        "chunks": (Chunk("c0", "text.", "T"),),
        "questions": (),
        "id": "e2",
    }
    for field_name, value in changes.items():
        changed = dataclasses.replace(entry, **{field_name: value})
        served = memory.entry_sha256(entry_to_proto(changed))
        assert served == entry_sha256(changed)
        assert served != entry_sha256(entry), field_name
        # Asked again (kept, or forgotten when full): the same digest.
        assert memory.entry_sha256(entry_to_proto(entry)) == entry_sha256(entry)
    # The metadata's order on the wire is not part of the entry.
    reordered = dataclasses.replace(entry, metadata={"lang": "en", "source": "s"})
    assert memory.entry_sha256(entry_to_proto(reordered)) == entry_sha256(entry)
