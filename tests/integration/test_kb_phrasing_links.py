"""Reviewed queries teach the KB, on SQLite and PostgreSQL with the real MiniLM: a query
linked to its entry is approved as a new phrasing (an audited KB change) or rejected,
and approved links come out as labelled traffic ``tribunal calibrate`` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.confidence import read_traffic
from tribunal.core import FailedPreconditionError, InvalidArgumentError, NotFoundError
from tribunal.core.storage import Database, DecisionRecord
from tribunal.kb import KbEntry, entry_sha256
from tribunal.retrieval import AuditedWrites, PhrasingLinks, SearchQuery, entry_questions
from tribunal.retrieval._change_audit import KbChangeLog

from tests.integration._retrieval import open_kb

pytestmark = pytest.mark.models

CARD = KbEntry("card-lost", "I lost my card", "Freeze the card in the app, then order one.")
PIN = KbEntry("pin", "How do I change my PIN?", "Change it at any cash machine of our network.")
QUERY = "my plastic got nicked on the bus"


def _decision(db: Database, query: str, *, kind: str = "answer", collection: str = "bank") -> str:
    return db.append_decision(
        DecisionRecord(
            kind=kind,
            query=query,
            decision="FALLBACK",
            collection=collection,
            reason="LOW_CONFIDENCE",
            candidate_ids=["pin", "card-lost"],
        )
    )


def test_an_approved_link_is_an_audited_phrasing_and_labelled_traffic(
    tmp_path: Path, database_url: str
) -> None:
    db = Database(database_url)
    kb = open_kb(tmp_path / "kb")
    kb.upsert("bank", [CARD, PIN], create=True)
    changes = KbChangeLog(db)
    writes = AuditedWrites(kb, changes)
    links = PhrasingLinks(db, max_query_chars=2000)
    audit_id = _decision(db, QUERY)
    before = kb.search(SearchQuery("bank", QUERY, top_k=2))

    link, created = links.propose("rita", audit_id=audit_id, entry_id="card-lost")
    assert (created, link.status, link.query, link.collection) == (True, "pending", QUERY, "bank")
    # The same query linked to the same entry again is the same link (any annotator).
    again, created = links.propose("bob", audit_id=audit_id, entry_id="card-lost")
    assert (again.id, created, again.proposed_by) == (link.id, False, "rita")
    assert links.linked_decisions([audit_id]) == {audit_id: ["card-lost"]}
    assert [x.id for x in links.links(collection="bank", status="pending")] == [link.id]

    approved = links.approve("cli:admin", link.id, writes, note="clear paraphrase")
    assert (approved.status, approved.decided_by, approved.reason) == (
        "approved",
        "cli:admin",
        "clear paraphrase",
    )
    entry = kb.collection("bank").entries(["card-lost"])["card-lost"]
    assert entry.questions == (QUERY,)
    change = changes.history("bank", entry_id="card-lost")[-1]
    assert (change.op, change.actor) == ("upsert", "cli:admin")
    assert (change.before_sha256, change.after_sha256) == (entry_sha256(CARD), entry_sha256(entry))
    assert change.kb_version == approved.kb_version > 0
    assert change.detail == {"phrasing_link": link.id, "phrasing": QUERY, "audit_id": audit_id}
    # Retrieval now finds the entry through the approved phrasing.
    after = kb.search(SearchQuery("bank", QUERY, top_k=2))
    assert (after.hits[0].entry.id, after.hits[0].matched_unit_id) == ("card-lost", "question:1")
    assert after.hits[0].dense_score > before.hits[0].dense_score
    with pytest.raises(FailedPreconditionError, match="approved by cli:admin"):
        links.approve("cli:other", link.id, writes)

    wrong, _ = links.propose("bob", audit_id=audit_id, entry_id="pin")
    with pytest.raises(InvalidArgumentError, match="reason is empty"):
        links.reject("cli:admin", wrong.id, "  ")
    rejected = links.reject("cli:admin", wrong.id, "not about PINs")
    assert (rejected.status, rejected.reason, rejected.kb_version) == (
        "rejected",
        "not about PINs",
        0,
    )
    assert kb.collection("bank").entries(["pin"])["pin"] == PIN  # untouched

    # A second query for the same entry, and one the entry already has as a phrasing.
    second = _decision(db, "Card  STOLEN")
    link2, _ = links.propose("rita", audit_id=second, entry_id="card-lost")
    links.approve("cli:admin", link2.id, writes)
    version = kb.collection("bank").store.last_seq()
    repeat = _decision(db, "i lost my CARD")
    link3, _ = links.propose("rita", audit_id=repeat, entry_id="card-lost")
    unchanged = links.approve("cli:admin", link3.id, writes)
    assert (unchanged.status, unchanged.kb_version) == ("approved", version)
    assert kb.collection("bank").entries(["card-lost"])["card-lost"].questions == (
        QUERY,
        "Card  STOLEN",
    )

    rows = links.traffic(collection="bank")
    assert rows == [
        {"query": "Card  STOLEN", "collection": "bank", "answers": ["card-lost"]},
        {"query": "i lost my CARD", "collection": "bank", "answers": ["card-lost"]},
        {"query": QUERY, "collection": "bank", "answers": ["card-lost"]},
    ]
    path = tmp_path / "traffic.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    traffic = read_traffic(path)
    assert [(q.query, sorted(q.answers)) for q in traffic.queries] == [
        (row["query"], ["card-lost"]) for row in rows
    ]
    # The review page's lookup of the candidates' questions, read-only.
    lookup = entry_questions(tmp_path / "kb")
    assert lookup("bank", ["pin", "gone"]) == {"pin": PIN.question}
    with pytest.raises(InvalidArgumentError):
        lookup("../bank", ["pin"])
    kb.close()
    db.close()


def test_links_refuse_what_they_cannot_apply(tmp_path: Path, database_url: str) -> None:
    db = Database(database_url)
    kb = open_kb(tmp_path / "kb", max_questions_per_item=1)
    kb.upsert("bank", [CARD], create=True)
    writes = AuditedWrites(kb, KbChangeLog(db))
    links = PhrasingLinks(db, max_query_chars=30)
    with pytest.raises(NotFoundError, match="no audit decision"):
        links.propose("rita", audit_id="0" * 32, entry_id="card-lost")
    with pytest.raises(FailedPreconditionError, match="only Answer queries"):
        links.propose("rita", audit_id=_decision(db, "q", kind="label"), entry_id="card-lost")
    with pytest.raises(InvalidArgumentError, match="query has 31 characters; the limit is 30"):
        links.propose("rita", audit_id=_decision(db, "x" * 31), entry_id="card-lost")
    with pytest.raises(InvalidArgumentError, match="entry_id is empty"):
        links.propose("rita", audit_id=_decision(db, "card gone"), entry_id=" ")
    gone, _ = links.propose("rita", audit_id=_decision(db, "card gone"), entry_id="no-such")
    with pytest.raises(NotFoundError, match="entry 'no-such' is not in collection 'bank'"):
        links.approve("cli:admin", gone.id, writes)
    first, _ = links.propose("rita", audit_id=_decision(db, "card stolen"), entry_id="card-lost")
    links.approve("cli:admin", first.id, writes)
    over, _ = links.propose("rita", audit_id=_decision(db, "wallet taken"), entry_id="card-lost")
    with pytest.raises(InvalidArgumentError, match="max_questions_per_item"):
        links.approve("cli:admin", over.id, writes)
    assert links.get(over.id).status == "pending"  # nothing half-done: it can be rejected
    # A read-modify-write whose entry changed in between writes nothing.
    stale = KbEntry(CARD.id, CARD.question, CARD.answer, questions=("wallet taken",))
    with pytest.raises(FailedPreconditionError, match="changed since it was read"):
        writes.upsert("cli:admin", "bank", [stale], expected_before={CARD.id: entry_sha256(CARD)})
    assert kb.collection("bank").entries([CARD.id])[CARD.id].questions == ("card stolen",)
    with pytest.raises(NotFoundError):
        links.get("missing")
    kb.close()
    db.close()
