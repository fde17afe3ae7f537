"""What the review page shows: quote highlighting and the debate history."""

from __future__ import annotations

from tribunal.jobs._review import (
    ReviewItem,
    debate_rounds,
    evidence_quotes,
    highlight,
    item_view,
)


def test_highlight_marks_case_insensitive_exact_quotes_and_merges_overlaps() -> None:
    chunk = "The incubation period is 2 to 14 days. The PERIOD is long."
    marked = highlight(chunk, ["incubation period", "period is 2", "the period", "not there"])
    assert marked.segments == (
        ("The ", False),
        ("incubation period is 2", True),
        (" to 14 days. ", False),
        ("The PERIOD", True),
        (" is long.", False),
    )
    assert marked.missing == ("not there",)
    assert "".join(text for text, _ in marked.segments) == chunk


def test_highlight_keeps_offsets_when_lowercasing_changes_length() -> None:
    # "İ".lower() is two characters: a lower()-then-find approach would cut the wrong span.
    marked = highlight("İstanbul <b>is</b> big", ["<b>is</b>"])
    assert marked.segments == (("İstanbul ", False), ("<b>is</b>", True), (" big", False))
    assert highlight("", ["x"]).segments == (("", False),)


def test_debate_rounds_read_the_stored_history_and_tolerate_other_json() -> None:
    history = {
        "outcome": "DEBATE_OUTCOME_ESCALATED",
        "rounds": [
            {
                "number": 1,
                "turns": [
                    {"agent": "A", "label": "LABEL_RELEVANT", "evidence": " 2 to 14 days "},
                    {"agent": "B", "label": "LABEL_IRRELEVANT", "evidence": "", "rationale": "r"},
                    "junk",
                ],
            },
            "junk",
            {"turns": [{"agent": "A", "label": "LABEL_RELEVANT", "evidence": "2 to 14 days"}]},
        ],
    }
    rounds = debate_rounds(history)
    assert [r["number"] for r in rounds] == [1, 3]
    assert rounds[0]["turns"][1] == {
        "agent": "B",
        "model": "",
        "label": "irrelevant",
        "evidence": "",
        "rationale": "r",
        "evidence_found": False,
    }
    assert evidence_quotes(history) == ["2 to 14 days"]
    assert debate_rounds({"answer": "an answer-path escalation"}) == []
    assert debate_rounds(["not", "a", "dict"]) == []


def test_item_view_carries_no_attention_marker() -> None:
    item = ReviewItem(
        key="attention:a1",
        token="0" * 32,
        query="q",
        chunk="Paris is the capital.",
        answers=("Paris",),
        history={},
        is_attention=True,
        expected_label="relevant",
    )
    assert item_view(item) == {
        "item": "0" * 32,
        "query": "q",
        "answers": ["Paris"],
        "passage": [{"text": "Paris is the capital.", "mark": False}],
        "missing_quotes": [],
        "rounds": [],
        "outcome": "",
    }
