"""A taught query observed as a new one: retrieval and the matcher leave its own phrasing
out, and what they report equals what a KB that was never taught it reports.

Real parts: the tiny profile's KB (MiniLM search, FAISS flat, BM25), its feature matcher
(MPNet) and the gateway's in-process stages, as ``tribunal calibrate`` runs them."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tribunal.commands._calibration_signals import observe_traffic
from tribunal.confidence import LabelledQuery, Traffic
from tribunal.core import Settings, load_settings
from tribunal.embedding import shared_profile_embedder
from tribunal.kb import KbEntry, phrasing_key
from tribunal.retrieval import KnowledgeBase, SearchMode, SearchQuery, writer_signer
from tribunal.retrieval._types import SearchHit
from tribunal.tuning import EntryTexts, pair_features

pytestmark = pytest.mark.models

TAUGHT = "my plastic still hasn't shown up in the post"
CLOSE = "the new card I ordered has not arrived"  # also taught; close to the card's question
OTHER = "card delivery is taking forever"


def _entries(without: str = "") -> list[KbEntry]:
    """The taught KB; ``without``: as if that query had not been taught (every added
    phrasing with its words gone)."""
    entries = [
        KbEntry(
            "card",
            "Where is my new card?",
            "Cards arrive within 5 days.",
            questions=("When will my card arrive?", OTHER, TAUGHT, CLOSE),
        ),
        KbEntry("pin", "How do I change my PIN?", "At any cash machine.", questions=("new PIN",)),
        KbEntry(
            "post",
            "Can you post me a statement?",
            "Statements are posted monthly.",
            # An added phrasing equal to a query, on another entry: left out there too.
            questions=("MY PLASTIC still hasn't shown up in the post",),
        ),
        KbEntry("lost", "I lost my card", "Freeze it in the app.", questions=("card is gone",)),
    ]
    key = phrasing_key(without)
    return [
        replace(e, questions=tuple(q for q in e.questions if phrasing_key(q) != key))
        for e in entries
    ]


def _kb(tmp_path: Path, name: str, without: str = "") -> Settings:
    settings = load_settings("tiny", data_dir=str(tmp_path / name), gateway={"collection": "bank"})
    signer, _ = writer_signer(settings)
    kb = KnowledgeBase.from_settings(settings, checker=None, signer=signer)
    kb.upsert("bank", _entries(without), create=True, self_evidenced=True)
    kb.close()
    return settings


def _search(settings: Settings, text: str, mode: SearchMode, leave_out: bool) -> list[SearchHit]:
    kb = KnowledgeBase.from_settings(settings, checker=None)
    try:
        query = SearchQuery("bank", text, top_k=4, mode=mode, leave_out_own_phrasing=leave_out)
        return list(kb.search(query).hits)
    finally:
        kb.close()


def test_retrieval_leaves_the_querys_own_phrasings_out_and_never_a_question(
    tmp_path: Path,
) -> None:
    taught = _kb(tmp_path, "taught")
    never = _kb(tmp_path, "never", without=TAUGHT)

    # Without leaving out, a copy of the query is the match: cosine 1 (MiniLM is uncased).
    plain = _search(taught, TAUGHT, SearchMode.DENSE, leave_out=False)
    copies = {("card", "question:3"), ("post", "question:1")}
    assert {(h.entry.id, h.matched_unit_id) for h in plain[:2]} == copies
    assert plain[0].dense_score == pytest.approx(1.0, abs=1e-5)

    # Left out: dense scores, units and neighbour votes are those of the untaught KB.
    left = _search(taught, TAUGHT, SearchMode.DENSE, leave_out=True)
    fresh = _search(never, TAUGHT, SearchMode.DENSE, leave_out=False)
    # (Unit ids are positions: the untaught KB numbers its phrasings without the query.)
    assert [h.entry.id for h in left] == [h.entry.id for h in fresh]
    assert [h.dense_score for h in left] == pytest.approx([h.dense_score for h in fresh], abs=1e-6)
    assert [h.neighbour_vote for h in left] == pytest.approx(
        [h.neighbour_vote for h in fresh], abs=1e-6
    )
    assert max(h.neighbour_vote for h in left if h.entry.id == "card") < max(
        h.neighbour_vote for h in plain if h.entry.id == "card"
    )

    # BM25 passes over both copies (any case or spacing) as well.
    plain_sparse = _search(taught, TAUGHT, SearchMode.SPARSE, leave_out=False)
    assert {(h.entry.id, h.matched_unit_id) for h in plain_sparse} >= copies
    for mode in (SearchMode.SPARSE, SearchMode.HYBRID):
        hits = _search(taught, TAUGHT, mode, leave_out=True)
        assert hits
        assert not {(h.entry.id, h.matched_unit_id) for h in hits} & copies

    # An entry's question is its own, not something taught: never left out.
    own = _search(taught, "Where is my new card?", SearchMode.DENSE, leave_out=True)
    assert (own[0].entry.id, own[0].matched_unit_id) == ("card", "question")


def test_the_tunes_pair_features_leave_the_own_phrasing_out(tmp_path: Path) -> None:
    settings = load_settings("tiny", data_dir=str(tmp_path / "data"))
    embedder = shared_profile_embedder(settings)

    def texts(without: str = "") -> EntryTexts:
        entries = _entries(without)
        return EntryTexts(
            tuple(e.id for e in entries),
            tuple(e.question for e in entries),
            tuple(e.answer for e in entries),
            tuple(e.phrasings() for e in entries),
        )

    queries = [TAUGHT, OTHER, "Where is my new card?"]
    left = pair_features(queries, texts(), embedder, leave_out_own=True)
    plain = pair_features(queries, texts(), embedder)
    fresh = pair_features([TAUGHT], texts(without=TAUGHT), embedder)
    for name, matrix in left.values.items():
        # The taught query: as if never taught, on every entry (both copies left out).
        assert np.allclose(matrix[0], fresh.values[name][0], atol=1e-6), name
    # The other queries lose only their own phrasings: OTHER is an added phrasing of
    # "card", the question is not added, so it stays.
    assert left.values["cos_question"][1, 0] < plain.values["cos_question"][1, 0]
    assert left.values["cos_question"][2, 0] == pytest.approx(1.0, abs=1e-5)
    assert plain.values["token_set"][0, 0] == 1.0 > left.values["token_set"][0, 0]


def test_calibration_observes_a_taught_query_as_the_untaught_kb_would(tmp_path: Path) -> None:
    taught = _kb(tmp_path, "taught")
    queries = (TAUGHT, CLOSE)
    nevers = [_kb(tmp_path, f"never-{i}", without=query) for i, query in enumerate(queries)]

    def signals(settings: Settings, is_taught: bool, *which: str) -> list[dict[str, Any]]:
        rows = tuple(
            LabelledQuery(query, frozenset({"card"}), f"row:{i}", taught=is_taught)
            for i, query in enumerate(which)
        )
        observed, _ = observe_traffic(settings, "bank", Traffic(rows, "4" * 64, "traffic.jsonl"))
        return [{c.entry_id: c.signals for c in found} for found in observed]

    left, plain = signals(taught, True, *queries), signals(taught, False, *queries)
    fresh = [signals(never, False, query)[0] for never, query in zip(nevers, queries, strict=True)]
    assert "card" in left[1]  # the taught entry itself is a candidate of CLOSE
    for query_left, query_fresh in zip(left, fresh, strict=True):
        assert query_left.keys() == query_fresh.keys()
        for entry_id, got in query_left.items():
            want = query_fresh[entry_id]
            # The matcher's P(match), its margin, the dense cosine and the vote: the
            # untaught KB's (BM25's statistics count the left-out text, so its scores may
            # differ).
            assert got.ensemble_p_match == pytest.approx(want.ensemble_p_match, abs=1e-5)
            assert got.ensemble_p_match_margin == pytest.approx(
                want.ensemble_p_match_margin, abs=1e-5
            )
            assert got.dense_score == pytest.approx(want.dense_score, abs=1e-5)
            assert got.neighbour_vote == pytest.approx(want.neighbour_vote, abs=1e-5)
    # Observed plainly, each taught query matches its own copies.
    for query_plain, query_left in zip(plain, left, strict=True):
        assert max(c.dense_score for c in query_plain.values()) == pytest.approx(1.0, abs=1e-5)
        assert max(c.ensemble_p_match for c in query_plain.values()) > max(
            c.ensemble_p_match for c in query_left.values()
        )
    assert plain[1]["card"].ensemble_p_match > left[1]["card"].ensemble_p_match
