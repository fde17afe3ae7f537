"""Teaching the KB: exactly which train queries become phrasings of which entries, never a
head or held-out query, duplicates and over-long queries skipped, the phrasing limit kept
by the most diverse subset, and bad input refused."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from numpy.typing import NDArray
from tribunal.confidence import LabelledQuery, Traffic
from tribunal.core import InvalidArgumentError
from tribunal.tuning import EntryTexts, TuneSplit, plan_teaching, query_key

ENTRIES = EntryTexts(
    ids=("card", "rate", "pin"),
    questions=("where is my card", "what is the exchange rate", "how do I change my pin"),
    answers=("Card arrival.", "Exchange rate.", "Change pin."),
    phrasings=(
        ("where is my card", "my card has not arrived yet"),
        ("what is the exchange rate",),
        ("how do I change my pin",),
    ),
)


def _traffic(rows: Sequence[tuple[str, Sequence[str]]]) -> Traffic:
    queries = tuple(LabelledQuery(q, frozenset(a), f"row:{i}") for i, (q, a) in enumerate(rows))
    return Traffic(queries, sha256="0" * 64, source="traffic.jsonl")


ROWS: list[tuple[str, Sequence[str]]] = [
    ("card still not here", ["card"]),  # 0 train: taught to card
    ("rate for euros", ["rate"]),  # 1 train: taught to rate
    ("  My card has NOT arrived   yet ", ["card"]),  # 2 train: card has it (case, spaces)
    ("is there a fee", []),  # 3 train: out of scope
    ("card or pin, either", ["card", "pin"]),  # 4 train: taught to both
    ("Rate for Euros", ["rate"]),  # 5 train: same text as row 1
    ("lost card", ["gone-entry"]),  # 6 train: no such entry in the KB
    ("x" * 30, ["pin"]),  # 7 train: too long (limit 29 below)
    ("pin reset", ["pin"]),  # 8 head: never taught
    ("euro rate today", ["rate"]),  # 9 held-out: never taught
]
SPLIT = TuneSplit(
    train=(0, 1, 2, 3, 4, 5, 6, 7),
    head=(8,),
    heldout=(9,),
    seed=0,
    heldout_fraction=0.1,
    head_fraction=0.1,
)


def test_train_queries_teach_their_right_entries_and_nothing_else_does() -> None:
    traffic = _traffic(ROWS)
    plan = plan_teaching(traffic, SPLIT, ENTRIES, max_question_chars=29, max_questions_per_item=64)
    assert plan.added == (
        ("card", "card still not here"),
        ("card", "card or pin, either"),
        ("rate", "rate for euros"),
        ("pin", "card or pin, either"),
    )
    assert plan.skipped == {
        "unanswerable": 2,
        "duplicate": 2,
        "too_long": 1,
        "over_limit": 0,
        "rejected": 0,
    }
    assert plan.dropped == ()
    taught_texts = {text for _, text in plan.added}
    assert not taught_texts & {ROWS[i][0] for i in (*SPLIT.head, *SPLIT.heldout)}
    taught = plan.taught(ENTRIES)
    assert taught.phrasings == (
        (
            "where is my card",
            "my card has not arrived yet",
            "card still not here",
            "card or pin, either",
        ),
        ("what is the exchange rate", "rate for euros"),
        ("how do I change my pin", "card or pin, either"),
    )
    # A link a reviewer rejected is not taught again.
    refused = plan_teaching(
        traffic,
        SPLIT,
        ENTRIES,
        max_question_chars=29,
        max_questions_per_item=64,
        rejected={("pin", "card or pin, either")},
    )
    assert refused.added == plan.added[:3]
    assert refused.skipped["rejected"] == 1
    record = plan.record()
    assert (record["phrasings_added"], record["entries_taught"]) == (4, 3)
    assert record["added"][0] == {"entry": "card", "query_key": query_key("card still not here")}
    assert record["dropped"] == []


def _table_embedder(table: dict[str, Sequence[float]]) -> object:
    def embed(texts: list[str]) -> NDArray[np.float64]:
        return np.asarray([table[t] for t in texts], dtype=np.float64)

    return embed


def test_a_full_entry_keeps_its_most_diverse_new_phrasings() -> None:
    rows: list[tuple[str, Sequence[str]]] = [
        ("a1", ["rate"]),
        ("a2", ["rate"]),  # nearly a1
        ("b1", ["rate"]),  # far from everything
        ("c1", ["rate"]),
    ]
    split = TuneSplit((0, 1, 2, 3), (), (), 0, 0.1, 0.1)
    table = {
        "what is the exchange rate": (1.0, 0.0, 0.0),
        "a1": (0.0, 1.0, 0.0),
        "a2": (0.0, 0.99, 0.14),
        "b1": (0.0, 0.0, 1.0),
        "c1": (0.7, 0.7, 0.0),
    }
    plan = plan_teaching(
        _traffic(rows),
        split,
        ENTRIES,
        max_question_chars=100,
        max_questions_per_item=2,
        embed=_table_embedder(table),  # type: ignore[arg-type]
    )
    # Farthest from the question first: a1 (cos 0) ties b1 and is earlier; then b1, far
    # from both. a2 (close to a1) and c1 are dropped and recorded.
    assert plan.added == (("rate", "a1"), ("rate", "b1"))
    assert plan.dropped == (("rate", "a2"), ("rate", "c1"))
    assert plan.skipped["over_limit"] == 2
    # Without an embedder the first ones in traffic order are kept.
    first = plan_teaching(
        _traffic(rows), split, ENTRIES, max_question_chars=100, max_questions_per_item=2
    )
    assert first.added == (("rate", "a1"), ("rate", "a2"))
    # An entry already at the limit takes nothing.
    full = plan_teaching(
        _traffic(rows), split, ENTRIES, max_question_chars=100, max_questions_per_item=0
    )
    assert (full.added, len(full.dropped)) == ((), 4)


def test_bad_input_is_refused_with_what_to_fix() -> None:
    traffic = _traffic(ROWS)
    with pytest.raises(InvalidArgumentError, match="outside the traffic"):
        plan_teaching(
            traffic,
            TuneSplit((0, 99), (8,), (9,), 0, 0.1, 0.1),
            ENTRIES,
            max_question_chars=29,
            max_questions_per_item=64,
        )
    leaky = _traffic([*ROWS[:9], ("CARD still not here", ["card"])])  # row 0's text held out
    with pytest.raises(InvalidArgumentError, match="also in the head or held-out"):
        plan_teaching(leaky, SPLIT, ENTRIES, max_question_chars=29, max_questions_per_item=64)
    with pytest.raises(InvalidArgumentError, match="also in the head or held-out"):
        plan_teaching(
            traffic,
            TuneSplit((0, 1, 8), (8,), (9,), 0, 0.1, 0.1),
            ENTRIES,
            max_question_chars=29,
            max_questions_per_item=64,
        )
    with pytest.raises(InvalidArgumentError, match="max_question_chars"):
        plan_teaching(traffic, SPLIT, ENTRIES, max_question_chars=0, max_questions_per_item=64)
