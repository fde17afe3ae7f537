"""Chunking: sentence-aligned, size-bounded, no overlap, title kept; ingest formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.core import InvalidArgumentError, split_sentences
from tribunal.kb import (
    KbEntry,
    chunk_sentences,
    chunk_text,
    deduplicate,
    entry_from_record,
    entry_to_record,
    read_entries,
)

from tests.conftest import SHARED

TEXT = (
    "COVID-19 spreads mainly between people in close contact. It travels in respiratory "
    "droplets, e.g. when someone coughs. Dr. Smith et al. measured this in 2020! Does it "
    "survive on surfaces? Studies disagree.\n\nWash your hands often. Stay home when sick."
)


def test_sentences_split_at_ends_and_paragraphs_but_not_abbreviations() -> None:
    assert split_sentences(TEXT) == [
        "COVID-19 spreads mainly between people in close contact.",
        "It travels in respiratory droplets, e.g. when someone coughs.",
        "Dr. Smith et al. measured this in 2020!",
        "Does it survive on surfaces?",
        "Studies disagree.",
        "Wash your hands often.",
        "Stay home when sick.",
    ]


@pytest.mark.parametrize("max_chars", [40, 60, 100, 150, 1000])
def test_chunks_are_bounded_sentence_aligned_and_do_not_overlap(max_chars: int) -> None:
    sentences = split_sentences(TEXT)
    chunks = chunk_text(TEXT, title="How COVID-19 spreads", max_chars=max_chars)
    assert all(len(c.text) <= max_chars for c in chunks)
    assert all(c.title == "How COVID-19 spreads" for c in chunks)
    assert [c.id for c in chunks] == [f"chunk-{i}" for i in range(len(chunks))]
    # No overlap, nothing lost: the chunks concatenate back to the sentences.
    assert " ".join(c.text for c in chunks) == " ".join(sentences)
    # Sentence-aligned: a sentence that fits a chunk is never cut across two.
    for sentence in sentences:
        if len(sentence) <= max_chars:
            assert any(sentence in c.text for c in chunks), sentence


def test_chunks_pack_sentences_greedily() -> None:
    chunks = chunk_sentences(["aaa.", "bbb.", "ccc."], max_chars=9)
    assert [c.text for c in chunks] == ["aaa. bbb.", "ccc."]


def test_an_oversized_sentence_is_cut_at_words_and_a_huge_word_hard() -> None:
    sentence = "alpha beta gamma delta epsilon " + "x" * 25
    chunks = chunk_sentences([sentence], max_chars=12)
    assert all(len(c.text) <= 12 for c in chunks)
    assert [c.text for c in chunks][:3] == ["alpha beta", "gamma delta", "epsilon"]
    assert "".join(c.text for c in chunks[3:]) == "x" * 25


def test_chunking_refuses_a_non_positive_bound() -> None:
    with pytest.raises(InvalidArgumentError, match="max_chars"):
        chunk_text("Some text.", max_chars=0)


def test_faq_record_becomes_an_entry_with_titled_answer_chunks() -> None:
    record = {
        "question": "What is a novel coronavirus? ",
        "answer": "A new coronavirus. " * 80,
        "source": "CDC",
        "lang": "en",
    }
    entry = entry_from_record(record, max_chars=300)
    assert entry.id.startswith("faq-")
    assert entry == entry_from_record(record, max_chars=300)  # stable id: re-ingest replaces
    assert entry.question == "What is a novel coronavirus?"
    assert entry.metadata == {"source": "CDC", "lang": "en"}
    assert len(entry.chunks) > 1
    assert all(c.title == entry.question and len(c.text) <= 300 for c in entry.chunks)
    assert entry.search_units()[0][0] == "question"


def test_corpus_record_uses_its_sentences_and_keeps_the_title() -> None:
    record = {"_id": "42", "title": "A title", "text": "ignored", "sentences": ["One.", "Two."]}
    entry = entry_from_record(record, max_chars=100)
    assert (entry.id, entry.question, entry.answer) == ("42", "", "")
    assert [(c.text, c.title) for c in entry.chunks] == [("One. Two.", "A title")]
    assert entry.search_units() == [("chunk-0", "A title\nOne. Two.")]


def test_native_records_round_trip() -> None:
    entry = entry_from_record(
        {"question": "Q?", "answer": "A.", "id": "e1", "source": "x"}, max_chars=100
    )
    assert entry_from_record(entry_to_record(entry), max_chars=1) == entry


def test_read_entries_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "kb.jsonl"
    path.write_text(
        json.dumps({"question": "Q1?", "answer": "A1."}) + "\n\n" + '{"question": "Q2?"}\n'
    )
    with pytest.raises(InvalidArgumentError, match=r"kb\.jsonl:3: .*'question' and 'answer'"):
        list(read_entries(path, max_chars=100))
    with pytest.raises(InvalidArgumentError, match="no such file"):
        list(read_entries(tmp_path / "missing.jsonl", max_chars=100))


def test_deduplicate_keeps_the_last_record_of_an_id() -> None:
    first, second, other = KbEntry("a", "Q?", "old"), KbEntry("a", "Q?", "new"), KbEntry("b", "R?")
    kept, repeated = deduplicate([first, other, second])
    assert kept == [second, other]
    assert repeated == ["a"]


def test_the_covid_faq_file_ingests_completely() -> None:
    path = SHARED / "data" / "covid-qa" / "faq_kb_en.jsonl"
    entries = list(read_entries(path, max_chars=1000))
    assert len(entries) == 213
    unique, repeated = deduplicate(entries)
    assert len(unique) + len(repeated) == 213
    assert all(e.question and e.answer and e.chunks for e in entries)
    assert all(len(c.text) <= 1000 for e in entries for c in e.chunks)
