"""The P(match) margin compares a candidate with other *answers*, not with itself filed
twice: candidates that give the same answer text do not cancel each other's margin."""

from __future__ import annotations

import pytest
from tribunal.gateway._candidates import answer_key, candidate_signals
from tribunal.v1 import common_pb2, ensemble_pb2, retrieval_pb2


def _hit(entry_id: str, answer: str, rank: int, answer_class: str = "") -> retrieval_pb2.SearchHit:
    metadata = {"answer_class": answer_class} if answer_class else {}
    return retrieval_pb2.SearchHit(
        entry=common_pb2.KbEntry(
            id=entry_id, question=f"q {entry_id}", answer=answer, metadata=metadata
        ),
        score=1.0 / (60 + rank),
        rank=rank,
    )


def _margins(hits: list[retrieval_pb2.SearchHit], p_match: list[float]) -> list[float | None]:
    matches = [ensemble_pb2.MatchResponse(p_match=p) for p in p_match]
    return [
        round(s.ensemble_p_match_margin, 6) if s.HasField("ensemble_p_match_margin") else None
        for s in candidate_signals(hits, matches)
    ]


def test_two_entries_of_one_answer_keep_their_margin_over_the_other_answer() -> None:
    hits = [
        _hit("fee-1", "Transfers in euro are free.", 1),
        _hit("fee-2", "  transfers in EURO are   free. ", 2),  # the same answer, filed twice
        _hit("pin", "Change it at a cash machine.", 3),
    ]
    # Before: fee-1 and fee-2 were rivals, so a clear match had a margin of about 0.
    assert _margins(hits, [0.92, 0.90, 0.10]) == [0.82, 0.80, -0.82]


def test_no_other_answer_among_the_candidates_leaves_the_margin_unset() -> None:
    hits = [_hit("fee-1", "Free.", 1), _hit("fee-2", "free.", 2)]
    assert _margins(hits, [0.9, 0.4]) == [None, None]
    assert _margins(hits[:1], [0.9]) == [None]


@pytest.mark.parametrize(
    ("p_match", "expected"),
    [([0.3, 0.8], [-0.5, 0.5]), ([0.6, 0.6], [0.0, 0.0])],
)
def test_different_answers_are_rivals(p_match: list[float], expected: list[float]) -> None:
    hits = [_hit("a", "Yes.", 1), _hit("b", "No.", 2)]
    assert _margins(hits, p_match) == expected


def test_answer_key_ignores_case_and_spacing_only() -> None:
    assert answer_key(_hit("a", " Free  of\ncharge. ", 1)) == "text:free of charge."
    assert answer_key(_hit("a", "Free of charge!", 1)) != answer_key(
        _hit("b", "Free of charge.", 1)
    )


def test_entries_of_one_answer_class_are_one_answer() -> None:
    """Two agencies answer the same question in their own words: one answer class."""
    hits = [
        _hit("who-symptoms", "Fever, dry cough and tiredness.", 1, answer_class="symptoms"),
        _hit("cdc-symptoms", "Fever or chills, cough, fatigue.", 2, answer_class="symptoms"),
        _hit("masks", "Wear a mask indoors.", 3),
    ]
    assert _margins(hits, [0.9, 0.8, 0.3]) == [0.6, 0.5, -0.6]
    # Without the class they are rivals.
    plain = [_hit(h.entry.id, h.entry.answer, h.rank) for h in hits]
    assert _margins(plain, [0.9, 0.8, 0.3]) == [0.1, -0.1, -0.6]
