"""Signals: validation names the field; missing is not zero; the proto mapping keeps that."""

from __future__ import annotations

import math

import pytest
from tribunal.confidence import DebateOutcome, Signals
from tribunal.confidence.servicer import signals_from_proto
from tribunal.core import InvalidArgumentError
from tribunal.v1 import confidence_pb2


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"ensemble_p_match": 1.2}, "signals.ensemble_p_match"),
        ({"entailment_p_entail": -0.1}, "signals.entailment_p_entail"),
        ({"ensemble_p_match": math.nan}, "signals.ensemble_p_match"),
        ({"dense_score": math.inf}, "signals.dense_score"),
        ({"judge_p_yes": {"strong": 1.5}}, "signals.judge_p_yes[strong]"),
        ({"judge_p_yes": {"strong": math.nan}}, "signals.judge_p_yes[strong]"),
        ({"extra": {"x": -math.inf}}, "signals.extra[x]"),
        ({"retrieval_rank": 0}, "signals.retrieval_rank"),
        ({"supporting_passages": 1.5}, "signals.supporting_passages"),
        ({"ensemble_p_match": True}, "signals.ensemble_p_match"),
        ({"debate": "maybe"}, "signals.debate"),
    ],
)
def test_bad_values_are_refused_with_the_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        Signals.from_mapping(values)
    assert caught.value.field == field


def test_unknown_signal_names_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="unknown signal 'bm25'") as caught:
        Signals.from_mapping({"bm25": 3.0})
    assert caught.value.field == "signals.bm25"


def test_mapping_round_trip_keeps_missing_missing() -> None:
    data = {
        "dense_score": 0.4,
        "retrieval_rank": 2,
        "judge_p_yes": {"a": 0.9},
        "debate": "agreed_relevant",
        "extra": {"overlap": 0.3},
    }
    signals = Signals.from_mapping(data)
    assert signals.debate is DebateOutcome.AGREED_RELEVANT
    assert signals.entailment_p_entail is None
    assert signals.to_mapping() == data
    assert Signals.from_mapping({"entailment_p_entail": None}).entailment_p_entail is None


def test_unset_proto_fields_are_missing_and_set_zeros_are_zeros() -> None:
    unset = signals_from_proto(confidence_pb2.Signals(dense_score=0.5))
    assert unset.entailment_p_entail is None
    assert unset.supporting_passages is None
    assert unset.debate is None
    zeros = signals_from_proto(
        confidence_pb2.Signals(
            entailment_p_entail=0.0,
            supporting_passages=0,
            debate=confidence_pb2.DEBATE_SIGNAL_DISAGREED,
            judge_p_yes={"a": 0.0},
        )
    )
    assert (zeros.entailment_p_entail, zeros.supporting_passages) == (0.0, 0)
    assert zeros.debate is DebateOutcome.DISAGREED
    assert dict(zeros.judge_p_yes) == {"a": 0.0}
