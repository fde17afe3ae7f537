"""``tribunal tune``'s teaching written to a real KB (tiny profile, MiniLM retrieval): each
train query a proposed and approved phrasing link, one audited change per entry naming
its links, the changed entries signed by the KB writer, a link a reviewer rejected left
rejected, retrieval finding them through
the taught phrasing; head and held-out queries never written."""

from __future__ import annotations

from pathlib import Path

import pytest
from tribunal.commands._teaching import rejected_links, write_teaching
from tribunal.confidence import LabelledQuery, Traffic
from tribunal.core import load_settings
from tribunal.core.storage import Database
from tribunal.kb import KbEntry, entry_sha256
from tribunal.retrieval import KnowledgeBase, PhrasingLinks, SearchQuery, writer_signer
from tribunal.retrieval._change_audit import KbChangeLog
from tribunal.retrieval._signing import trusted_keys
from tribunal.tuning import EntryTexts, TuneSplit, plan_teaching

pytestmark = pytest.mark.models

ENTRIES = [
    KbEntry("card", "Where is my new card?", "Cards arrive within 5 working days."),
    KbEntry("pin", "How do I change my PIN?", "Change it at any cash machine."),
]
ROWS = [
    ("my plastic still hasn't shown up in the post", ("card",)),  # train
    ("swap the four digit code", ("pin",)),  # train
    ("Where is my new card?", ("card",)),  # train: the entry's own question
    ("can I get a loan", ()),  # train, out of scope
    ("card delivery taking forever", ("card",)),  # head
    ("forgot my secret number", ("pin",)),  # held-out
]


def test_teaching_writes_audited_signed_phrasings_of_train_queries_only(tmp_path: Path) -> None:
    settings = load_settings("tiny", data_dir=str(tmp_path / "data"))
    signer, _ = writer_signer(settings)
    kb = KnowledgeBase.from_settings(settings, checker=None, signer=signer)
    kb.upsert("bank", ENTRIES, create=True, self_evidenced=True)
    kb.close()
    traffic = Traffic(
        tuple(LabelledQuery(q, frozenset(a), f"row:{i}") for i, (q, a) in enumerate(ROWS)),
        sha256="1" * 64,
        source="traffic.jsonl",
    )
    split = TuneSplit((0, 1, 2, 3), (4,), (5,), 0, 0.2, 0.2)
    texts = EntryTexts(
        tuple(e.id for e in ENTRIES),
        tuple(e.question for e in ENTRIES),
        tuple(e.answer for e in ENTRIES),
        tuple(e.phrasings() for e in ENTRIES),
    )
    plan = plan_teaching(traffic, split, texts, max_question_chars=2000, max_questions_per_item=64)
    assert plan.added == (("card", ROWS[0][0]), ("pin", ROWS[1][0]))
    assert plan.skipped["duplicate"] == 1

    # A reviewer rejected one of these query–entry links before: it stays rejected.
    db = Database(settings.database_url)
    db.create_schema()
    review = PhrasingLinks(db, max_query_chars=2000)
    refused, _ = review.add("rita", collection="bank", entry_id="pin", query=ROWS[1][0])
    review.reject("rita", refused.id, "a code is not a PIN here")
    # The tune leaves it out of its plan (what it fits on); the write keeps it rejected
    # all the same.
    assert rejected_links(settings, "bank") == {("pin", "swap the four digit code")}

    written = write_teaching(settings, "bank", plan, actor="tribunal-tune (test)")
    assert (written["links"], written["entries"], written["rejected_before"]) == (1, 2, 1)

    kb = KnowledgeBase.from_settings(settings, checker=None)
    try:
        stored = kb.collection("bank").entries(["card", "pin"])
        assert stored["card"].questions == (ROWS[0][0],)
        assert stored["pin"].questions == ()
        every_phrasing = {t for e in stored.values() for t in e.phrasings()}
        assert not every_phrasing & {ROWS[4][0], ROWS[5][0]}
        assert kb.collection("bank").store.last_seq() == written["kb_version"]
        # Retrieval finds the entry through the taught phrasing, and its served record is
        # the writer's signature of the new entry version.
        hit = kb.search(SearchQuery("bank", ROWS[0][0], top_k=2)).hits[0]
        assert (hit.entry.id, hit.matched_unit_id) == ("card", "question:1")
        assert hit.served is not None
        record = trusted_keys(settings).open(hit.served)
        assert record["entry_sha256"] == entry_sha256(stored["card"])
    finally:
        kb.close()

    links = review.links(collection="bank")
    assert sorted((link.entry_id, link.query, link.status) for link in links) == [
        ("card", ROWS[0][0], "approved"),
        ("pin", ROWS[1][0], "rejected"),
    ]
    card_link = next(link for link in links if link.entry_id == "card")
    assert (card_link.proposed_by, card_link.decided_by) == (
        "tribunal-tune (test)",
        "tribunal-tune (test)",
    )
    change = KbChangeLog(db).history("bank", entry_id="card")[-1]
    assert change.actor == "tribunal-tune (test)"
    assert change.after_sha256 == entry_sha256(stored["card"])
    assert change.detail == {"phrasing_links": [card_link.id], "phrasings": [ROWS[0][0]]}

    # Teaching the same plan again changes nothing in the KB (the links exist already).
    again = write_teaching(settings, "bank", plan, actor="tribunal-tune (test)")
    assert (again["links"], again["rejected_before"]) == (0, 1)
