"""``tribunal ask --file --classes``: any entry of a right entry's answer class is right,
in each row and in the summary, as ``tribunal calibrate --classes`` counts it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tribunal.commands._ask_rows import (
    AskedQuery,
    reply_row,
    summary_markdown,
    with_answer_classes,
)
from tribunal.confidence import AnswerClasses, ClassRule
from tribunal.core import NotFoundError
from tribunal.v1 import common_pb2, gateway_pb2

IDS = ["who-symptoms", "cdc-symptoms", "masks"]


def _classes(tmp_path: Path) -> Path:
    classes = AnswerClasses.build(
        {"entries": 3},
        IDS,
        [("cdc-symptoms", "who-symptoms", 0.93, 0.71)],
        ClassRule("embedder_large"),
    )
    return classes.save(tmp_path / "classes.json")


def _accepted(entry_id: str) -> gateway_pb2.AnswerResponse:
    return gateway_pb2.AnswerResponse(decision=common_pb2.DECISION_ACCEPT, kb_entry_id=entry_id)


def test_an_entry_of_the_right_class_is_right(tmp_path: Path) -> None:
    queries = [
        AskedQuery("What are the symptoms?", "1", answers=("who-symptoms",)),
        AskedQuery("Should I wear a mask?", "2", answers=("masks",)),
        AskedQuery("What is the capital of France?", "3", answers=()),
        AskedQuery("unlabelled", "4"),
    ]
    widened = with_answer_classes(queries, _classes(tmp_path))
    assert [q.answers for q in widened] == [
        ("cdc-symptoms", "who-symptoms"),
        ("masks",),
        (),
        None,
    ]
    # The CDC's answer to the WHO's question: wrong by the single id, right by the class.
    assert reply_row(queries[0], _accepted("cdc-symptoms"), 0.1)["correct"] is False
    rows = [
        reply_row(widened[0], _accepted("cdc-symptoms"), 0.1),
        reply_row(widened[1], _accepted("who-symptoms"), 0.1),
        reply_row(
            widened[2], gateway_pb2.AnswerResponse(decision=common_pb2.DECISION_FALLBACK), 0.1
        ),
    ]
    assert [r["correct"] for r in rows] == [True, False, True]
    summary = summary_markdown(rows, 1.0)
    assert "| accepted with a right entry | 1 |" in summary
    assert "| accepted with a wrong entry (answerable query) | 1 |" in summary


def test_a_missing_classes_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match="does not exist"):
        with_answer_classes([AskedQuery("q", "1", answers=("a",))], tmp_path / "absent.json")
