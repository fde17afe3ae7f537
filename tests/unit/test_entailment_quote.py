"""Stage 0: quotes found verbatim, nearly, or not at all, with offsets into the premise."""

from __future__ import annotations

import pytest
from tribunal.entailment._quote import QuoteChecker, normalise_with_offsets

PREMISE = (
    "The virus spreads mainly between people who are in close contact with each other, "
    "typically within 1 metre (short-range). A person can be infected when aerosols "
    "“containing the virus” are inhaled."
)


def test_exact_quote_is_found_at_its_offsets() -> None:
    match = QuoteChecker().find(PREMISE, "spreads mainly between people")
    assert match.found
    assert match.ratio == 100.0
    assert PREMISE[match.start : match.end] == "spreads mainly between people"


def test_case_whitespace_and_punctuation_are_normalised() -> None:
    match = QuoteChecker().find(
        PREMISE, 'A PERSON can be infected when aerosols "containing the  virus"'
    )
    assert match.found
    assert match.ratio == 100.0
    assert PREMISE[match.start : match.end] == (
        "A person can be infected when aerosols “containing the virus"
    )


def test_near_quote_with_one_changed_word_is_found() -> None:
    match = QuoteChecker(min_ratio=90).find(
        PREMISE, "spreads mostly between people who are in close contact"
    )
    assert match.found
    assert 90 <= match.ratio < 100
    assert (
        PREMISE[match.start : match.end] == "spreads mainly between people who are in close contact"
    )


def test_absent_quote_is_not_found() -> None:
    match = QuoteChecker().find(PREMISE, "the vaccine is 95% effective against severe disease")
    assert not match.found
    assert match.ratio < 60


def test_short_quotes_must_match_exactly() -> None:
    checker = QuoteChecker(min_quote_chars=12)
    assert checker.find(PREMISE, "1 metre").found
    assert not checker.find(PREMISE, "2 metres").found


def test_empty_quote_is_not_found() -> None:
    assert not QuoteChecker().find(PREMISE, "  ...  ").found


def test_normalised_offsets_point_back_into_the_original() -> None:
    text, offsets = normalise_with_offsets("Hello,  World!")
    assert text == "hello world"
    assert [("Hello,  World!")[o] for o in offsets] == list("Hello,World")


def test_ratio_bounds_are_checked() -> None:
    with pytest.raises(ValueError, match="min_ratio"):
        QuoteChecker(min_ratio=0)
