"""The neighbour vote: each candidate's share of the query's nearest search units, from
the dense index through retrieval's reply to the gateway's signal and the calibrator."""

from __future__ import annotations

import math

import numpy as np
import pytest
from tribunal.confidence import Signals
from tribunal.confidence._features import FeatureSpace
from tribunal.confidence._monotone import PORTABLE_SIGNALS
from tribunal.core import InvalidArgumentError, RetrievalSettings
from tribunal.gateway._candidates import candidate_signals
from tribunal.retrieval import DenseIndex
from tribunal.retrieval._dense import group_best_per_entry, neighbour_votes
from tribunal.v1 import common_pb2, ensemble_pb2, retrieval_pb2


def test_votes_weigh_units_by_cosine_below_the_nearest() -> None:
    votes = neighbour_votes([0.9, 0.85, 0.8], ["a", "b", "a"], temperature=0.05)
    weights = [1.0, math.exp(-1.0), math.exp(-2.0)]
    total = sum(weights)
    assert votes == pytest.approx({"a": (1.0 + math.exp(-2.0)) / total, "b": weights[1] / total})
    assert sum(votes.values()) == pytest.approx(1.0)
    assert neighbour_votes([], [], temperature=0.05) == {}
    # Every neighbour one entry's: exactly 1, not 1 + 2⁻⁵² (which a reply check refuses).
    scores = [0.91, 0.9, 0.87, 0.86, 0.85, 0.83, 0.8, 0.79, 0.7, 0.69]
    assert neighbour_votes(scores, ["a"] * 10, temperature=0.05) == {"a": 1.0}
    assert neighbour_votes([0.3] * 7, ["a"] * 7, temperature=0.05) == {"a": 1.0}
    # A colder vote is the nearest unit's alone; a warmer one counts units alike.
    assert neighbour_votes([0.9, 0.85], ["a", "b"], temperature=1e-3)["a"] == pytest.approx(1.0)
    assert neighbour_votes([0.9, 0.85], ["a", "b"], temperature=10.0)["a"] == pytest.approx(
        0.5, abs=0.01
    )


def test_the_walk_reads_its_neighbours_past_the_depth_and_skips_dead_rows() -> None:
    scores = np.asarray([0.95, 0.94, 0.9, 0.8, 0.7], dtype=np.float32)
    rows = np.asarray([0, 1, 2, 3, 4], dtype=np.int64)
    live = np.asarray([True, False, True, True, True])
    matches = group_best_per_entry(
        scores,
        rows=rows,
        row_entry=["a", "b", "a", "b", "c"],
        row_unit=["q", "q", "q:1", "q:1", "q"],
        live=live,
        depth=1,
        neighbours=3,
        temperature=0.05,
    )
    # Depth 1 keeps only a; its vote still counts the three nearest live units (a, a, b).
    assert [m.entry_id for m in matches] == ["a"]
    expected = neighbour_votes([0.95, 0.9, 0.8], ["a", "a", "b"], temperature=0.05)["a"]
    assert matches[0].vote == pytest.approx(expected)
    assert group_best_per_entry(
        scores, rows=rows, row_entry=["a", "b", "a", "b", "c"],
        row_unit=["q"] * 5, live=live, depth=2,
    )[0].vote is None  # fmt: skip


def test_the_index_votes_over_its_nearest_units_like_brute_force() -> None:
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(40, 16)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owners = [f"e{i % 8}" for i in range(40)]
    settings = RetrievalSettings(vote_neighbours=6, vote_temperature=0.1)
    dense = DenseIndex(16, settings)
    dense.build(owners, [f"u{i}" for i in range(40)], vectors)
    query = vectors[[3]] + 0.05 * rng.normal(size=(1, 16)).astype(np.float32)
    (matches,) = dense.search(query / np.linalg.norm(query), depth=3)
    cosines = (vectors @ (query / np.linalg.norm(query)).ravel()).astype(np.float64)
    nearest = np.argsort(-cosines)[:6]
    expected = neighbour_votes(
        cosines[nearest].tolist(), [owners[i] for i in nearest], temperature=0.1
    )
    assert len(matches) == 3
    for match in matches:
        assert match.vote == pytest.approx(expected.get(match.entry_id, 0.0), abs=1e-5)
    assert sum(m.vote or 0.0 for m in matches) <= 1.0 + 1e-9


def test_a_query_among_one_entrys_units_gets_a_vote_of_exactly_one() -> None:
    rng = np.random.default_rng(3)
    base = rng.normal(size=16)
    vectors = np.stack([base + 0.01 * rng.normal(size=16) for _ in range(12)] + [-base])
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    dense = DenseIndex(16, RetrievalSettings())
    dense.build(["a"] * 12 + ["b"], [f"u{i}" for i in range(13)], vectors)
    (matches,) = dense.search(vectors[[0]], depth=2)
    assert [(m.entry_id, m.vote) for m in matches] == [("a", 1.0), ("b", 0.0)]


def _hit(entry_id: str, answer: str, rank: int, vote: float | None) -> retrieval_pb2.SearchHit:
    hit = retrieval_pb2.SearchHit(
        entry=common_pb2.KbEntry(id=entry_id, question=f"q {entry_id}", answer=answer),
        score=1.0 / (60 + rank),
        rank=rank,
    )
    if vote is not None:
        hit.neighbour_vote = vote
    return hit


def test_the_gateway_signal_is_the_answers_share_not_the_entrys() -> None:
    hits = [
        _hit("fee-1", "Transfers are free.", 1, 0.45),
        _hit("fee-2", "transfers are  FREE.", 2, 0.35),  # the same answer filed twice
        _hit("pin", "At a cash machine.", 3, 0.2),
        _hit("old", "Ask a branch.", 4, None),  # a reply without the vote: left absent
    ]
    matches = [ensemble_pb2.MatchResponse(p_match=p) for p in (0.9, 0.8, 0.1, 0.1)]
    signals = candidate_signals(hits, matches)
    votes = [s.neighbour_vote if s.HasField("neighbour_vote") else None for s in signals]
    assert votes == pytest.approx([0.8, 0.8, 0.2, None])


def test_the_signal_is_a_share_in_zero_one_read_as_it_is() -> None:
    assert Signals(neighbour_vote=0.25).to_mapping() == {"neighbour_vote": 0.25}
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(InvalidArgumentError) as raised:
            Signals(neighbour_vote=bad)
        assert raised.value.field == "signals.neighbour_vote"
    assert "neighbour_vote" in PORTABLE_SIGNALS
    space = FeatureSpace.fit([Signals(neighbour_vote=0.25, dense_score=0.5)])
    assert "neighbour_vote" in space.columns
    # A calibrator fitted before the signal existed ignores it when it arrives.
    older = FeatureSpace.fit([Signals(dense_score=0.5)])
    assert older.raw([Signals(neighbour_vote=0.9, dense_score=0.5)]).tolist() == [[0.5]]
