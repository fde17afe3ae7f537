"""Several phrasings per KB entry, searched with the real MiniLM: every phrasing is found
(dense and BM25), and an entry comes back once, naming the phrasing that matched."""

from __future__ import annotations

from pathlib import Path

import pytest
from tribunal.kb import KbEntry, entry_from_proto, entry_to_proto
from tribunal.retrieval import SearchMode, SearchQuery

from tests.integration._retrieval import open_kb

pytestmark = pytest.mark.models

CARD = KbEntry(
    "card-lost",
    "I lost my card",
    "Freeze the card in the app, then order a replacement.",
    questions=(
        "My bank card was stolen",
        "Someone took my wallet with the debit card inside",
    ),
)
FEE = KbEntry(
    "transfer-fee",
    "Is there a fee for transfers?",
    "Transfers in euro are free; other currencies cost 0.5%.",
    questions=("How much does sending money abroad cost?",),
)
PIN = KbEntry(
    "pin",
    "How do I change my PIN?",
    "Change it at any cash machine of our network.",
    questions=("I forgot my PIN number",),
)
ENTRIES = [CARD, FEE, PIN]


def _separate(entries: list[KbEntry]) -> list[KbEntry]:
    """The same phrasings as one entry each (the way a KB without phrasings holds them)."""
    return [
        KbEntry(f"{entry.id}#{i}", text, entry.answer)
        for entry in entries
        for i, text in enumerate(entry.phrasings())
    ]


@pytest.mark.parametrize("mode", [SearchMode.HYBRID, SearchMode.DENSE, SearchMode.SPARSE])
def test_one_candidate_per_entry_naming_the_phrasing_that_matched(
    tmp_path: Path, mode: SearchMode
) -> None:
    kb = open_kb(tmp_path)
    kb.upsert("bank", ENTRIES, create=True)
    result = kb.search(SearchQuery("bank", "my debit card was stolen", top_k=3, mode=mode))
    ids = [hit.entry.id for hit in result.hits]
    assert ids[0] == "card-lost"
    assert len(ids) == len(set(ids))  # each entry once, however many phrasings match
    assert result.hits[0].matched_unit_id == "question:1"  # "My bank card was stolen"
    assert result.hits[0].entry.questions == CARD.questions
    kb.close()


def test_phrasings_as_separate_entries_crowd_the_head(tmp_path: Path) -> None:
    """What phrasings fix: filed as separate entries, one intent fills the top hits."""
    kb = open_kb(tmp_path)
    kb.upsert("separate", _separate(ENTRIES), create=True)
    kb.upsert("phrased", ENTRIES, create=True)
    query = "someone stole my card"
    separate = kb.search(SearchQuery("separate", query, top_k=3))
    phrased = kb.search(SearchQuery("phrased", query, top_k=3))
    assert [h.entry.id.split("#")[0] for h in separate.hits] == ["card-lost"] * 3
    assert phrased.hits[0].entry.id == "card-lost"
    assert {h.entry.id for h in phrased.hits} == {"card-lost", "transfer-fee", "pin"}
    kb.close()


def test_every_phrasing_is_indexed_stored_and_replaced(tmp_path: Path) -> None:
    kb = open_kb(tmp_path)
    kb.upsert("bank", ENTRIES, create=True)
    # Per entry: its question, its phrasings and (no chunks) its answer.
    assert kb.stats("bank")[0].chunks == 3 + 4 + 3
    # A new phrasing: found at once, by keywords alone too.
    grown = KbEntry(
        PIN.id, PIN.question, PIN.answer, questions=(*PIN.questions, "Unlock my blocked code")
    )
    kb.upsert("bank", [grown])
    hit = kb.search(SearchQuery("bank", "unlock blocked code", top_k=1, mode=SearchMode.SPARSE))
    assert (hit.hits[0].entry.id, hit.hits[0].matched_unit_id) == ("pin", "question:2")
    kb.close()
    # Reopened: the phrasings come back from the store, not re-embedded.
    reopened = open_kb(tmp_path)
    assert reopened.stats("bank")[0].chunks == 3 + 5 + 3
    again = reopened.search(SearchQuery("bank", "unlock blocked code", top_k=1))
    assert (again.hits[0].entry.id, again.hits[0].matched_unit_id) == ("pin", "question:2")
    assert again.hits[0].entry.questions == grown.questions
    reopened.close()


def test_phrasings_cross_the_wire() -> None:
    message = entry_to_proto(CARD)
    assert list(message.questions) == list(CARD.questions)
    assert entry_from_proto(message) == CARD
