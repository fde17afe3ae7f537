"""The review page against callers it must refuse, on a real server and store.

A request under a foreign ``Host`` (DNS rebinding) gets 403; the API needs an
annotator key (``tribunal review add-annotator`` prints it), the marker header a
cross-site request cannot send, and no foreign ``Origin``; the sign-in cookie is
HttpOnly and SameSite=Strict; votes are recorded under the key's name, a second vote
on an item is refused by the store, and a revoked key signs in no more.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import select
from tribunal.cli import main
from tribunal.core.storage import Database
from tribunal.jobs._review import ReviewQueue
from tribunal.jobs._review_annotators import AnnotatorRegistry
from tribunal.jobs._review_tables import ReviewAnnotatorRow, ReviewVoteRow
from tribunal.jobs._review_web import CSRF_HEADER, SESSION_COOKIE, review_server

from tests.integration._review_items import seed_escalations, serving

pytestmark = pytest.mark.security


@dataclass
class Site:
    port: int
    db: Database
    escalations: list[str]
    annotators: AnnotatorRegistry


@pytest.fixture
def site(database_url: str) -> Iterator[Site]:
    db = Database(database_url)
    escalations = seed_escalations(db, 2)
    queue = ReviewQueue(db, votes_per_item=3)
    annotators = AnnotatorRegistry(db)
    server, sock = review_server(queue, annotators=annotators, host="127.0.0.1", port=0)
    try:
        with serving(server, sock) as port:
            yield Site(port, db, escalations, annotators)
    finally:
        db.close()


def _call(
    site: Site,
    method: str,
    path: str,
    body: object = None,
    *,
    host: str = "127.0.0.1",
    key: str | None = None,
    marker: bool = True,
    origin: str | None = None,
) -> tuple[int, dict[str, object], http.client.HTTPResponse]:
    """One request with exactly these headers (urllib would add its own Host)."""
    connection = http.client.HTTPConnection("127.0.0.1", site.port, timeout=10)
    headers = {"Host": f"{host}:{site.port}"}
    if marker:
        headers[CSRF_HEADER] = "1"
    if key is not None:
        headers["Cookie"] = f"{SESSION_COOKIE}={key}"
    if origin is not None:
        headers["Origin"] = origin
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    connection.request(method, path, body=data, headers=headers)
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, (json.loads(payload) if payload.startswith(b"{") else {}), response


def test_a_foreign_host_gets_403(site: Site) -> None:
    key = site.annotators.add("rita")
    status, body, _ = _call(site, "GET", "/api/next", host="rebind.attacker.example", key=key)
    assert status == 403
    assert "rebind.attacker.example" in str(body["error"])
    # The page itself is refused too; the loopback names are served.
    assert _call(site, "GET", "/", host="rebind.attacker.example")[0] == 403
    for host in ("127.0.0.1", "localhost"):
        assert _call(site, "GET", "/", host=host)[0] == 200
    assert _call(site, "GET", "/api/next", host="localhost", key=key)[0] == 200


def test_the_api_needs_a_key_the_marker_header_and_the_own_origin(site: Site) -> None:
    key = site.annotators.add("rita")
    status, body, _ = _call(site, "GET", "/api/next")
    assert (status, "add-annotator" in str(body["error"])) == (401, True)
    assert _call(site, "GET", "/api/next", key="not-a-key")[0] == 401
    # What a cross-site form or image would send: no marker header.
    status, body, _ = _call(site, "GET", "/api/next", key=key, marker=False)
    assert (status, body["error"]) == (
        403,
        f"send the {CSRF_HEADER}: 1 header (the review page does)",
    )
    assert _call(site, "GET", "/api/next", key=key, origin="https://evil.example")[0] == 403
    own = f"http://127.0.0.1:{site.port}"
    assert _call(site, "GET", "/api/next", key=key, origin=own)[0] == 200


def test_the_host_is_parsed_strictly_and_the_origin_includes_its_port(site: Site) -> None:
    key = site.annotators.add("rita")
    for forged in (
        "localhost:1@evil.example",
        "localhost@evil.example",
        "evil.example#localhost",
        "localhost:",
        "localhost:99999",
        "local host",
        "[::1",
    ):
        connection = http.client.HTTPConnection("127.0.0.1", site.port, timeout=10)
        connection.request("GET", "/", headers={"Host": forged})
        assert connection.getresponse().status in (400, 403), forged
        connection.close()
    # Another port of the same machine is another origin.
    for origin in (
        f"http://127.0.0.1:{site.port + 1}",
        "http://127.0.0.1",
        f"http://localhost:{site.port}",
        f"http://127.0.0.1:{site.port}/path",
        f"ftp://127.0.0.1:{site.port}",
        "null",
    ):
        assert _call(site, "GET", "/api/next", key=key, origin=origin)[0] == 403, origin
    assert (
        _call(site, "GET", "/api/next", key=key, origin=f"http://127.0.0.1:{site.port}")[0] == 200
    )


def test_wrong_keys_are_throttled(site: Site) -> None:
    """300 wrong keys in about half a second: after the client's tenth, every attempt is
    refused (429) without the key being looked at — the right key included, until the
    window passes."""
    key = site.annotators.add("rita")
    statuses = []
    started = time.monotonic()
    for attempt in range(300):
        statuses.append(_call(site, "POST", "/api/session", {"key": f"guess-{attempt}"})[0])
    elapsed = time.monotonic() - started
    assert statuses[:10] == [401] * 10
    assert statuses[10:] == [429] * 290, elapsed
    status, body, _ = _call(site, "POST", "/api/session", {"key": key})
    assert status == 429
    assert "too many wrong annotator keys" in str(body["error"])
    assert _call(site, "GET", "/api/next", key=f"{key}-wrong")[0] == 429


def test_sign_in_sets_a_strict_http_only_cookie(site: Site) -> None:
    key = site.annotators.add("rita")
    status, body, _ = _call(site, "POST", "/api/session", {"key": "wrong-key"})
    assert status == 401
    status, body, response = _call(site, "POST", "/api/session", {"key": key})
    assert (status, body) == (200, {"annotator": "rita"})
    cookie = response.getheader("set-cookie") or ""
    assert cookie.startswith(f"{SESSION_COOKIE}={key};")
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie or "SameSite=Strict" in cookie
    assert _call(site, "GET", "/api/session", key=key)[1] == {"annotator": "rita"}


def test_a_second_vote_by_the_same_annotator_is_refused(site: Site) -> None:
    e1, _ = site.escalations
    rita, bob = site.annotators.add("rita"), site.annotators.add("bob")
    vote = {"item": e1, "label": "relevant", "seconds": 3.5}
    status, body, _ = _call(site, "POST", "/api/vote", vote, key=rita)
    assert (status, body) == (200, {"stored": True, "label": "relevant", "labelled": 1})
    # The same annotator again, even with the other label: refused, nothing changes.
    for label in ("relevant", "irrelevant"):
        status, body, _ = _call(site, "POST", "/api/vote", {**vote, "label": label}, key=rita)
        assert status == 409
        assert "already voted 'relevant'" in str(body["error"])
    # A name in the body is not who votes: the key is.
    status, _, _ = _call(site, "POST", "/api/vote", {**vote, "annotator": "rita"}, key=bob)
    assert status == 200
    with site.db.session() as session:
        rows = session.execute(
            select(ReviewVoteRow.annotator, ReviewVoteRow.label).order_by(ReviewVoteRow.annotator)
        ).all()
    assert [tuple(row) for row in rows] == [("bob", "relevant"), ("rita", "relevant")]


def test_a_revoked_key_no_longer_signs_in(site: Site, database_url: str) -> None:
    key = site.annotators.add("rita")
    assert _call(site, "GET", "/api/next", key=key)[0] == 200
    assert main(["review", "remove-annotator", "rita", "--database-url", database_url]) == 0
    assert _call(site, "GET", "/api/next", key=key)[0] == 401
    # Re-adding gives a new key; the old one stays invalid.
    fresh = site.annotators.add("rita")
    assert fresh != key
    assert _call(site, "GET", "/api/next", key=key)[0] == 401
    assert _call(site, "GET", "/api/next", key=fresh)[0] == 200


def test_add_annotator_prints_a_key_stored_only_as_its_hash(
    database_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["review", "add-annotator", "ann", "--database-url", database_url]) == 0
    key = capsys.readouterr().out.strip()
    assert len(key) >= 24
    registry = AnnotatorRegistry(Database(database_url))
    assert registry.annotator(key) == "ann"
    with registry.db.session() as session:
        row = session.get(ReviewAnnotatorRow, "ann")
        assert row is not None
        assert row.key_sha256 == hashlib.sha256(key.encode()).hexdigest()
        assert key not in (row.name, row.key_sha256)
    assert main(["review", "add-annotator", "ann", "--database-url", database_url]) == 2
    assert "already has a key" in capsys.readouterr().err
