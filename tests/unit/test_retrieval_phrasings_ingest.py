"""Phrasings in the KB format: read from JSONL, written back, validated with clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.core import InvalidArgumentError, RetrievalSettings
from tribunal.kb import (
    Chunk,
    KbEntry,
    entry_from_record,
    entry_sha256,
    entry_to_record,
    phrasing_index,
    phrasing_unit_id,
    read_entries,
)
from tribunal.retrieval._validation import check_entries

SETTINGS = RetrievalSettings(max_questions_per_item=3, max_question_chars=40)


def test_faq_and_native_records_carry_phrasings(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    rows = [
        {
            "question": "Lost card",
            "questions": [" Card stolen ", "Wallet gone"],
            "answer": "Freeze it.",
        },
        {"id": "pin", "question": "Change PIN", "answer": "At a machine.", "chunks": []},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    card, pin = read_entries(path, max_chars=500)
    assert card.questions == ("Card stolen", "Wallet gone")
    assert card.phrasings() == ("Lost card", "Card stolen", "Wallet gone")
    assert "questions" not in card.metadata
    # The id hashes the canonical question and the answer: a new phrasing keeps it.
    plain = entry_from_record({"question": "Lost card", "answer": "Freeze it."}, max_chars=500)
    assert card.id == plain.id
    assert pin.questions == ()
    again = entry_from_record(entry_to_record(card), record_format="entries", max_chars=1)
    assert again == card


def test_an_entry_without_phrasings_keeps_its_record_and_version() -> None:
    entry = KbEntry("a", "Q?", "A.", {"k": "v"}, (Chunk("c", "A."),))
    assert "questions" not in entry_to_record(entry)
    assert entry_sha256(entry) == entry_sha256(
        KbEntry("a", "Q?", "A.", {"k": "v"}, (Chunk("c", "A."),))
    )
    assert entry_sha256(entry) != entry_sha256(
        KbEntry("a", "Q?", "A.", {"k": "v"}, (Chunk("c", "A."),), ("Q2?",))
    )


def test_search_units_name_each_phrasing() -> None:
    entry = KbEntry("a", "Lost card", "Freeze it.", questions=("Card stolen", "Wallet gone"))
    assert entry.search_units() == [
        ("question", "Lost card"),
        ("question:1", "Card stolen"),
        ("question:2", "Wallet gone"),
        ("answer", "Freeze it."),
    ]
    assert [phrasing_index(phrasing_unit_id(i)) for i in range(3)] == [0, 1, 2]
    assert [
        phrasing_index(u) for u in ("answer", "c0", "question:", "question:01", "question:x")
    ] == [None] * 5


@pytest.mark.parametrize(
    ("entry", "field", "words"),
    [
        (
            KbEntry("a", "Lost card", "Freeze it.", questions=("b", "c", "d", "e")),
            "entries[0].questions",
            "limit is 3",
        ),
        (
            KbEntry("a", "Lost card", "Freeze it.", questions=("x" * 41,)),
            "entries[0].questions[0]",
            "limit is 40",
        ),
        (
            KbEntry("a", "Lost card", "Freeze it.", questions=("ok words", "  ")),
            "entries[0].questions[1]",
            "empty",
        ),
        (
            KbEntry("a", "Lost card", "Freeze it.", questions=("LOST  card",)),
            "entries[0].questions[0]",
            "repeats entries[0].question",
        ),
        (
            KbEntry("a", "Lost card", "Freeze it.", questions=("Stolen", "stolen")),
            "entries[0].questions[1]",
            "repeats entries[0].questions[0]",
        ),
        (
            KbEntry("a", "", "Freeze it.", questions=("Stolen card",)),
            "entries[0].question",
            "canonical",
        ),
        (
            KbEntry("a", "Lost card", "Freeze it.", questions=("the ?",)),
            "entries[0].questions[0]",
            "no searchable words",
        ),
        (
            KbEntry("a", "Lost card", "Freeze it.", chunks=(Chunk("question:1", "text here"),)),
            "entries[0].chunks[0].id",
            "chunk ids",
        ),
    ],
)
def test_bad_phrasings_say_what_to_fix(entry: KbEntry, field: str, words: str) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        check_entries([entry], SETTINGS)
    assert caught.value.field == field
    assert words in caught.value.message


@pytest.mark.parametrize("value", ["one string", [1, 2], {"a": "b"}])
def test_questions_must_be_a_list_of_strings(value: object) -> None:
    with pytest.raises(InvalidArgumentError, match="'questions' must be a list of strings"):
        entry_from_record({"question": "Q", "answer": "A", "questions": value}, max_chars=100)
