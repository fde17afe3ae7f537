"""An audited fallback's review on a real server and store: the page asks which entry, if
any, answers the query, offers the decision's candidates and a search of the KB, and the
vote names the picked entry (or none); ``--from-audit``'s traffic labels the fallback with
it, and the pick is proposed as a phrasing link. Keys, marker header and origin as for
every vote; an ACCEPT's review still asks yes or no."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from tribunal.audit import AUDIT_REASON, audit_traffic
from tribunal.core.storage import Database, DecisionRecord, EscalationRecord
from tribunal.jobs._review import ReviewQueue
from tribunal.jobs._review_annotators import AnnotatorRegistry
from tribunal.jobs._review_pick import search_stored
from tribunal.jobs._review_web import review_server
from tribunal.retrieval import PhrasingLinks

from tests.integration._review_items import serving
from tests.integration.test_review_security import Site, _call

QUESTIONS = {
    "card-lost": "I lost my card",
    "pin": "How do I change my PIN?",
    "fees": "What are the card fees?",
}


def _search(_collection: str, text: str, limit: int) -> list[dict[str, str]]:
    words = text.lower()
    return [
        {"id": i, "question": q} for i, q in QUESTIONS.items() if words == i or words in q.lower()
    ][:limit]


@contextlib.contextmanager
def _serving(db: Database, queue: ReviewQueue) -> Iterator[Site]:
    annotators = AnnotatorRegistry(db)
    server, sock = review_server(
        queue,
        annotators=annotators,
        host="127.0.0.1",
        port=0,
        links=PhrasingLinks(db, max_query_chars=200),
        questions=lambda _c, ids: {i: QUESTIONS[i] for i in ids if i in QUESTIONS},
        search=_search,
    )
    with serving(server, sock) as port:
        yield Site(port, db, [], annotators)


@pytest.fixture
def site(database_url: str) -> Iterator[Site]:
    db = Database(database_url)
    try:
        with _serving(db, ReviewQueue(db, votes_per_item=2)) as serving:
            yield serving
    finally:
        db.close()


def _audited(db: Database, index: int, decision: str, query: str) -> str:
    audit_id = f"{index:032d}"
    p = 0.5 if decision == "ACCEPT" else 0.1
    db.record_decision(
        DecisionRecord(
            id=audit_id,
            kind="answer",
            query=query,
            decision=decision,
            collection="bank",
            confidence=0.4,
            candidate_ids=["pin", "card-lost"],
            versions={"confidence": {"calibrator": "v1"}},
            detail={"audit": {"p": p, "sampled": True, "stratum": decision.lower(), "min_p": p}},
        ),
        EscalationRecord(
            query=query,
            chunk="Q: How do I change my PIN?\nA: In the app.",
            reason=AUDIT_REASON,
            item_id=audit_id,
            history={"decision": decision, "kb_entry_id": "pin", "collection": "bank", "p": p},
        ),
    )
    return audit_id


def test_a_fallback_review_picks_the_entry_and_from_audit_uses_it(site: Site) -> None:
    fallback = _audited(site.db, 0, "FALLBACK", "my card was stolen")
    keys = [site.annotators.add("rita"), site.annotators.add("sam")]
    status, body, _ = _call(site, "GET", "/api/next", key=keys[0])
    item = body["item"]
    assert status == 200
    assert item["pick"] == {
        "question": "Which entry, if any, answers this query?",
        "collection": "bank",
        "shown": "pin",
        "candidates": [
            {"id": "pin", "question": "How do I change my PIN?"},
            {"id": "card-lost", "question": "I lost my card"},
        ],
    }
    # The KB search, signed in only.
    assert _call(site, "GET", "/api/entries?collection=bank&q=fees")[0] == 401
    status, body, _ = _call(site, "GET", "/api/entries?collection=bank&q=fees", key=keys[0])
    assert (status, body["entries"]) == (
        200,
        [{"id": "fees", "question": "What are the card fees?"}],
    )
    assert _call(site, "GET", "/api/entries?collection=bank", key=keys[0])[0] == 400
    # A pick that is not in the KB, or with "none", is refused with what to fix.
    vote = {"item": item["item"], "label": "relevant", "entry_id": "nope"}
    status, body, _ = _call(site, "POST", "/api/vote", vote, key=keys[0])
    assert (status, "no entry 'nope' in collection 'bank'" in str(body["error"])) == (400, True)
    vote = {"item": item["item"], "label": "irrelevant", "entry_id": "card-lost"}
    assert _call(site, "POST", "/api/vote", vote, key=keys[0])[0] == 400
    # Without the marker header nothing is recorded.
    vote = {"item": item["item"], "label": "relevant", "entry_id": "card-lost"}
    assert _call(site, "POST", "/api/vote", vote, key=keys[0], marker=False)[0] == 403
    # Both annotators pick card-lost (a candidate that was not the one shown).
    for key in keys:
        status, body, _ = _call(site, "POST", "/api/vote", vote, key=key)
        assert (status, body["stored"]) == (200, True)
    rows, counts = audit_traffic(site.db, collection="bank", votes_per_item=2)
    assert [(row["audit_id"], row["answers"]) for row in rows] == [(fallback, ["card-lost"])]
    assert counts["by_decision"] == {"FALLBACK": 1}
    # The pick is also a pending phrasing link (one per query and entry: the first pick's).
    stored = PhrasingLinks(site.db, max_query_chars=200).links(status="pending")
    assert [(x.entry_id, x.proposed_by, x.audit_id) for x in stored] == [
        ("card-lost", "rita", fallback)
    ]


def test_an_accept_review_asks_yes_or_no_and_refuses_a_pick(site: Site) -> None:
    _audited(site.db, 1, "ACCEPT", "how to change pin")
    key = site.annotators.add("rita")
    _, body, _ = _call(site, "GET", "/api/next", key=key)
    assert "pick" not in body["item"]
    vote = {"item": body["item"]["item"], "label": "relevant", "entry_id": "pin"}
    status, reply, _ = _call(site, "POST", "/api/vote", vote, key=key)
    assert (status, "for audited fallbacks only" in str(reply["error"])) == (400, True)


def test_the_kb_search_reads_the_stored_entries(tmp_path: Path) -> None:
    path = tmp_path / "entries.sqlite3"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE entries (id TEXT PRIMARY KEY, record TEXT)")
    for entry_id, question in QUESTIONS.items():
        db.execute(
            "INSERT INTO entries VALUES (?, ?)",
            (entry_id, json.dumps({"question": question, "answer": "100% sure"})),
        )
    db.commit()
    db.close()
    assert search_stored(path, "pin", 10)[0] == {"id": "pin", "question": "How do I change my PIN?"}
    assert [e["id"] for e in search_stored(path, "card", 10)] == ["card-lost", "fees"]
    assert search_stored(path, "100%", 1) == [{"id": "card-lost", "question": "I lost my card"}]
    assert search_stored(path, "_", 10) == []  # LIKE wildcards are matched literally
    assert search_stored(tmp_path / "missing.sqlite3", "pin", 10) == []


def test_a_pick_on_an_attention_check_is_refused_like_any_other_item(
    site: Site, tmp_path: Path
) -> None:
    from tribunal.jobs._review import _attention_token, load_attention
    from tribunal.jobs._review_pick import pick_vote

    path = tmp_path / "attention.jsonl"
    path.write_text('{"query": "q", "chunk": "c", "answers": ["a"], "label": "relevant"}\n')
    checks = load_attention(path)
    queue = ReviewQueue(site.db, votes_per_item=1, attention=checks)
    _audited(site.db, 2, "ACCEPT", "how to change pin")
    real = queue.next_item("sam", exclude=[_attention_token(checks[0])])
    assert real is not None
    assert not real.is_attention
    accept = real.token
    assert queue.pick_target(accept) is None
    refusals = []
    for token in (_attention_token(checks[0]), accept):
        with pytest.raises(Exception, match="for audited fallbacks only") as info:
            pick_vote(
                queue, "rita", token, "relevant", seconds=None, entry_id="pin",
                questions=None, links=None,
            )  # fmt: skip
        refusals.append(str(info.value))
    assert refusals[0] == refusals[1]  # nothing tells an attention check apart


def test_an_attention_check_can_ask_which_entry_too(database_url: str, tmp_path: Path) -> None:
    from tribunal.jobs._review import load_attention, review_stats

    path = tmp_path / "attention.jsonl"
    pick = {"collection": "bank", "candidates": ["pin", "card-lost"], "entry": "card-lost"}
    path.write_text(
        json.dumps({"query": "my card is gone", "chunk": "c", "label": "relevant", "pick": pick})
        + "\n"
    )
    db = Database(database_url)
    queue = ReviewQueue(db, votes_per_item=2, attention=load_attention(path), attention_rate=0.5)
    try:
        with _serving(db, queue) as serving:
            keys = {name: serving.annotators.add(name) for name in ("rita", "sam")}
            for index in range(3, 9):  # real items beside it
                _audited(db, index, "FALLBACK", f"my card was stolen {index}")
            for name, picked in (("rita", "card-lost"), ("sam", "pin")):
                while True:  # the check comes among the real items, in a seeded order
                    _, body, _ = _call(serving, "GET", "/api/next", key=keys[name])
                    item = body["item"]
                    if item["query"] == "my card is gone":
                        break
                    assert "pick" in item
                    none = {"item": item["item"], "label": "irrelevant"}
                    assert _call(serving, "POST", "/api/vote", none, key=keys[name])[0] == 200
                # Shown as an audited fallback is: nothing tells it apart.
                assert item["pick"]["candidates"][1] == {
                    "id": "card-lost",
                    "question": "I lost my card",
                }
                vote = {"item": item["item"], "label": "relevant", "entry_id": picked}
                assert _call(serving, "POST", "/api/vote", vote, key=keys[name])[0] == 200
        accuracy = {a["annotator"]: a["attention_accuracy"] for a in review_stats(db)["annotators"]}
        assert accuracy == {"rita": 1.0, "sam": 0.0}
        # No phrasing link comes from a check.
        assert PhrasingLinks(db, max_query_chars=200).links() == []
    finally:
        db.close()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        json.dumps({"query": "q", "chunk": "c", "label": "irrelevant", "pick": pick}) + "\n"
    )
    with pytest.raises(Exception, match=r"relevant with pick\.entry set"):
        load_attention(bad)
