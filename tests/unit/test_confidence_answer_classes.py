"""Answer-equivalence classes: the rule, the review, the components, the rerunnable check."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tribunal.confidence import (
    AnswerClasses,
    ClassRule,
    ReviewedLink,
    candidate_links,
)
from tribunal.confidence._answer_classes import classes_from_links
from tribunal.core import FailedPreconditionError

SHIPPED = Path(__file__).resolve().parents[2] / (
    "services/tribunal/artifacts/answer-classes/covid-qa-faq-en.json"
)


def _unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float64)
    return vector / np.linalg.norm(vector)


IDS = ["a", "b", "c", "d"]
VECTORS = np.vstack([_unit(1, 0, 0), _unit(1, 0.1, 0), _unit(1, 0.2, 0), _unit(0, 1, 0)])
ANSWERS = [
    "Wash your hands often with soap and water.",
    "Wash your hands often with soap and water for 20 seconds.",
    "Stay at home when you are sick.",
    "Wash your hands often with soap and water.",
]
RULE = ClassRule("embedder_large", question_cosine=0.9, answer_ratio=0.6)


def test_the_rule_needs_both_a_close_question_and_a_shared_answer() -> None:
    links = candidate_links(IDS, VECTORS, ANSWERS, RULE)
    # a–b: close questions, shared answer; a–c and b–c: close questions, other answers;
    # a–d: the same answer, unrelated questions.
    assert [(a, b) for a, b, _, _ in links] == [("a", "b")]


def test_review_rejects_and_adds_links_before_the_components() -> None:
    links = [("a", "b", 0.99, 0.9), ("b", "c", 0.95, 0.7)]
    plain = AnswerClasses.build({"entries": 4}, IDS, links, RULE)
    assert plain.classes == (("a", "b", "c"),)
    reviewed = AnswerClasses.build(
        {"entries": 4},
        IDS,
        links,
        RULE,
        rejected=[ReviewedLink.of("c", "b", "different question")],
        added=[ReviewedLink.of("d", "c", "same question, other words")],
    )
    assert reviewed.classes == (("a", "b"), ("c", "d"))
    assert reviewed.class_of("a") == frozenset({"a", "b"})
    assert reviewed.class_of("zz") == frozenset({"zz"})
    assert reviewed.expand(["a", "d"]) == frozenset({"a", "b", "c", "d"})
    with pytest.raises(FailedPreconditionError, match="no longer links"):
        AnswerClasses.build({}, IDS, links, RULE, rejected=[ReviewedLink.of("a", "d", "stale")])


def test_components_are_sorted_and_singletons_left_out() -> None:
    assert classes_from_links(IDS, [("c", "d"), ("a", "b"), ("b", "c")]) == [["a", "b", "c", "d"]]
    assert classes_from_links(IDS, []) == []


def test_a_file_round_trips_and_differences_are_named(tmp_path: Path) -> None:
    built = AnswerClasses.build(
        {"entries": 4}, IDS, candidate_links(IDS, VECTORS, ANSWERS, RULE), RULE
    )
    loaded = AnswerClasses.load(built.save(tmp_path / "classes.json"))
    assert loaded.differences(built) == []
    other = AnswerClasses.build({"entries": 4}, IDS, [("c", "d", 0.95, 0.9)], RULE)
    assert "rule now links ('a', 'b') (not in the file)" in built.differences(other)


def test_the_shipped_covid_classes_are_consistent_with_their_own_review() -> None:
    """The committed file: its classes are the components of its links after its review
    (the full recomputation from the KB is `tribunal answer-classes check`, models test)."""
    shipped = AnswerClasses.load(SHIPPED)
    data = json.loads(SHIPPED.read_text())
    ids = sorted(
        {e for a, b, _, _ in shipped.links for e in (a, b)}
        | {e for r in shipped.added for e in r.pair}
    )
    rebuilt = AnswerClasses.build(
        shipped.kb, ids, shipped.links, shipped.rule, rejected=shipped.rejected, added=shipped.added
    )
    assert rebuilt.classes == shipped.classes
    assert all(r["reason"] for r in data["review"]["rejected"] + data["review"]["added"])
    assert len(shipped.classes) == 19
