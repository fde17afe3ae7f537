"""The review page's query-to-entry links on a real server and store (SQLite and
PostgreSQL): the same key, marker header and origin rules as votes; a link is recorded
as pending under the signed-in annotator, and only an Answer decision can be linked."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tribunal.core.storage import Database, DecisionRecord
from tribunal.jobs._review import ReviewQueue
from tribunal.jobs._review_annotators import AnnotatorRegistry
from tribunal.jobs._review_web import review_server
from tribunal.retrieval import PhrasingLinks

from tests.integration._review_items import serving
from tests.integration.test_review_security import Site, _call

pytestmark = pytest.mark.security


@pytest.fixture
def site(database_url: str) -> Iterator[Site]:
    db = Database(database_url)
    queue = ReviewQueue(db, votes_per_item=3)
    annotators = AnnotatorRegistry(db)
    links = PhrasingLinks(db, max_query_chars=200)
    questions = {"card-lost": "I lost my card", "pin": "How do I change my PIN?"}
    server, sock = review_server(
        queue,
        annotators=annotators,
        host="127.0.0.1",
        port=0,
        links=links,
        questions=lambda _collection, ids: {i: questions[i] for i in ids if i in questions},
    )
    try:
        with serving(server, sock) as port:
            yield Site(port, db, [], annotators)
    finally:
        db.close()


def _decision(db: Database, query: str, decision: str, kind: str = "answer") -> str:
    return db.append_decision(
        DecisionRecord(
            kind=kind,
            query=query,
            decision=decision,
            collection="bank",
            reason="LOW_CONFIDENCE" if decision == "FALLBACK" else "",
            candidate_ids=["pin", "card-lost"],
        )
    )


def test_linking_needs_a_key_the_marker_header_and_the_own_origin(site: Site) -> None:
    audit_id = _decision(site.db, "my card was stolen", "FALLBACK")
    key = site.annotators.add("rita")
    link = {"audit_id": audit_id, "entry_id": "card-lost"}
    assert _call(site, "POST", "/api/link", link)[0] == 401
    assert _call(site, "POST", "/api/link", link, key="not-a-key")[0] == 401
    assert _call(site, "POST", "/api/link", link, key=key, marker=False)[0] == 403
    assert _call(site, "POST", "/api/link", link, key=key, origin="https://evil.example")[0] == 403
    assert _call(site, "GET", "/api/linkable", key=key, marker=False)[0] == 403
    assert _call(site, "GET", "/api/linkable", host="rebind.example", key=key)[0] == 403
    # Nothing was recorded by the refused calls.
    assert PhrasingLinks(site.db, max_query_chars=200).links() == []


def test_a_signed_in_annotator_links_a_fallen_back_query(site: Site) -> None:
    fell_back = _decision(site.db, "my card was stolen", "FALLBACK")
    accepted = _decision(site.db, "how to change pin", "ACCEPT")
    key = site.annotators.add("rita")
    status, body, _ = _call(site, "GET", "/api/linkable", key=key)
    assert status == 200
    assert [row["audit_id"] for row in body["decisions"]] == [fell_back]  # FALLBACK by default
    row = body["decisions"][0]
    assert (row["query"], row["collection"], row["reason"], row["linked"]) == (
        "my card was stolen",
        "bank",
        "LOW_CONFIDENCE",
        [],
    )
    assert row["candidates"] == [
        {"id": "pin", "question": "How do I change my PIN?"},
        {"id": "card-lost", "question": "I lost my card"},
    ]
    status, body, _ = _call(site, "GET", "/api/linkable?decision=any", key=key)
    assert [row["audit_id"] for row in body["decisions"]] == [accepted, fell_back]

    own = f"http://127.0.0.1:{site.port}"
    link = {"audit_id": fell_back, "entry_id": "card-lost"}
    status, body, _ = _call(site, "POST", "/api/link", link, key=key, origin=own)
    assert (status, body["created"]) == (201, True)
    assert (body["link"]["proposed_by"], body["link"]["status"]) == ("rita", "pending")
    status, body, _ = _call(site, "POST", "/api/link", link, key=key)
    assert (status, body["created"]) == (200, False)
    status, body, _ = _call(site, "GET", "/api/linkable", key=key)
    assert body["decisions"][0]["linked"] == ["card-lost"]
    stored = PhrasingLinks(site.db, max_query_chars=200).links(status="pending")
    assert [(x.query, x.entry_id, x.proposed_by, x.audit_id) for x in stored] == [
        ("my card was stolen", "card-lost", "rita", fell_back)
    ]


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"audit_id": "0" * 32, "entry_id": "pin"}, 404, "no audit decision"),
        ({"audit_id": None, "entry_id": "pin"}, 400, "audit_id must be a string"),
        ({"audit_id": "LABEL", "entry_id": "pin"}, 409, "only Answer queries"),
        ({"audit_id": "FALLBACK", "entry_id": ""}, 400, "entry_id is empty"),
        ({"audit_id": "FALLBACK", "entry_id": "x" * 257}, 400, "limit is 256"),
        (["not", "an", "object"], 400, "JSON object"),
    ],
)
def test_bad_links_say_what_to_fix(site: Site, body: object, status: int, words: str) -> None:
    ids = {
        "LABEL": _decision(site.db, "q", "relevant", kind="label"),
        "FALLBACK": _decision(site.db, "q", "FALLBACK"),
    }
    if isinstance(body, dict) and body["audit_id"] in ids:
        body = {**body, "audit_id": ids[body["audit_id"]]}
    key = site.annotators.add("rita")
    answer, reply, _ = _call(site, "POST", "/api/link", body, key=key)
    assert (answer, words in str(reply["error"])) == (status, True)
    assert _call(site, "GET", "/api/linkable?decision=maybe", key=key)[0] == 400
    assert _call(site, "GET", "/api/linkable?limit=1000", key=key)[0] == 400
