"""What a query taught to the KB is observed without: its own added phrasings, case and
spacing aside, never an entry's question; and recorded signals say which rows left it out."""

from __future__ import annotations

from pathlib import Path

import pytest
from tribunal.commands._calibration_signals import read_signals, write_signals
from tribunal.confidence import LabelledQuery, Traffic, read_traffic
from tribunal.core import InvalidArgumentError
from tribunal.gateway._candidates import without_own_phrasing
from tribunal.kb import phrasing_key
from tribunal.v1 import retrieval_pb2

from tests.unit._confidence_data import BINDING


def _hit() -> retrieval_pb2.SearchHit:
    hit = retrieval_pb2.SearchHit(rank=1, dense_score=0.9)
    hit.entry.id = "card"
    hit.entry.question = "Where is my card?"
    hit.entry.answer = "Within 5 days."
    hit.entry.questions.extend(["card not here", "Card  NOT here ", "still waiting"])
    return hit


def test_the_querys_own_phrasings_go_and_the_rest_stay() -> None:
    hit = _hit()
    left = without_own_phrasing(hit, "card not HERE")
    assert list(left.entry.questions) == ["still waiting"]
    assert (left.entry.question, left.entry.answer, left.dense_score) == (
        "Where is my card?",
        "Within 5 days.",
        pytest.approx(0.9),
    )
    assert len(hit.entry.questions) == 3  # the hit itself is not changed
    # The question is the entry's own: a query with its words keeps it.
    assert without_own_phrasing(hit, "where is my CARD?") is hit
    assert phrasing_key("  Where is\tmy card? ") == phrasing_key("where is my card?")


def test_signals_recorded_plainly_are_not_read_for_taught_rows(tmp_path: Path) -> None:
    def traffic(taught: bool) -> Traffic:
        rows = (LabelledQuery("card not here", frozenset({"card"}), "row:0", taught=taught),)
        return Traffic(rows, sha256="5" * 64, source="traffic.jsonl")

    path = tmp_path / "signals.jsonl"
    write_signals(path, traffic(False), [[]], BINDING)
    assert read_signals(path, traffic(False))[1] == BINDING
    with pytest.raises(InvalidArgumentError, match="recorded for other queries"):
        read_signals(path, traffic(True))


def test_a_traffic_file_may_mark_taught_rows_which_then_never_certify(tmp_path: Path) -> None:
    path = tmp_path / "traffic.jsonl"
    path.write_text(
        '{"query": "card not here", "answers": ["card"], "taught": true}\n'
        '{"query": "new pin", "answers": ["pin"]}\n'
    )
    taught, plain = read_traffic(path).queries
    assert (taught.taught, taught.fit_only, plain.taught, plain.fit_only) == (
        True,
        True,
        False,
        False,
    )
    path.write_text('{"query": "card not here", "answers": ["card"], "taught": "yes"}\n')
    with pytest.raises(InvalidArgumentError, match="'taught' must be true or false"):
        read_traffic(path)
