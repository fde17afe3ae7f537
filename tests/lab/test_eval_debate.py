"""``tribunal-lab eval debate``'s per-item cache: a debate result survives its JSON row.

The engine is the ``ScriptedEngine`` TEST DOUBLE (tests/unit/_debate_engine.py): a
real small model cannot be steered into a three-round debate on demand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from tribunal.debate import DebateItem, DebateOutcome
from tribunal.debate._debate import DreamDebate
from tribunal_lab.evaluation.debate import add_arguments, result_from_dict, result_to_dict

from tests.unit._debate_engine import ScriptedEngine, by_turn

ITEM = DebateItem(query="capital of France", chunk="Paris is the capital of France.")


def test_a_three_round_debate_round_trips_through_its_cache_row() -> None:
    labels = {("A", 1): "relevant", ("B", 1): "irrelevant"}
    labels |= {("A", 2): "relevant", ("B", 2): "irrelevant"}
    labels |= {("A", 3): "irrelevant", ("B", 3): "irrelevant"}
    engine = ScriptedEngine(by_turn(labels))
    result = DreamDebate((engine, engine), max_rounds=3).assess(ITEM)  # type: ignore[arg-type]
    assert result.outcome is DebateOutcome.AGREED
    assert len(result.rounds) == 3
    row = json.loads(json.dumps(result_to_dict(result)))  # what the cache line holds
    assert result_from_dict(row) == result
    assert result_from_dict(row).truncated(1) == result.truncated(1)


def test_the_cache_defaults_outside_the_committed_tree(monkeypatch: pytest.MonkeyPatch) -> None:
    def parsed() -> argparse.Namespace:
        parser = argparse.ArgumentParser()
        add_arguments(parser)
        return parser.parse_args([])

    monkeypatch.delenv("TRIBUNAL_LAB_CACHE", raising=False)
    assert parsed().cache_dir == Path(".build/lab-cache/debate")
    monkeypatch.setenv("TRIBUNAL_LAB_CACHE", "/tmp/lab-cache")
    assert parsed().cache_dir == Path("/tmp/lab-cache/debate")
