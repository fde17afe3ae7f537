"""The review page in a real headless Chromium (Debian's, driven by Playwright).

Two escalations with a debate history and one attention check on a fresh store
(SQLite and PostgreSQL); an annotator signs in with their key and labels them with
the keyboard, and the votes are read back from ``review_votes``. Set
``REVIEW_SCREENSHOT=docs/img/review.png`` to refresh the README's screenshot.

Where chromium is absent the test skips and says why (installing it needs root: `make
browser`); CI installs it and sets ``TRIBUNAL_REQUIRE_BROWSER=1``, under which a missing
chromium fails instead.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select
from tribunal.core.storage import Database
from tribunal.jobs._review import ReviewQueue, load_attention
from tribunal.jobs._review_annotators import AnnotatorRegistry
from tribunal.jobs._review_tables import ReviewVoteRow
from tribunal.jobs._review_web import CSRF_HEADER, SESSION_COOKIE, review_server

from tests.integration._review_items import (
    ATTENTION,
    ESCALATIONS,
    seed_escalations,
    serving,
    write_attention,
)

CHROMIUM = os.environ.get("CHROMIUM_EXECUTABLE", "/usr/bin/chromium")
REQUIRE_BROWSER = os.environ.get("TRIBUNAL_REQUIRE_BROWSER", "") not in ("", "0")
SKIP_REASON = (
    f"no chromium at {CHROMIUM}: the review page's browser test needs Debian's chromium "
    "(`make browser` installs it with apt, as root or through sudo; or set "
    "CHROMIUM_EXECUTABLE); CI installs it"
)

needs_chromium = pytest.mark.skipif(
    shutil.which(CHROMIUM) is None and not REQUIRE_BROWSER, reason=SKIP_REASON
)


@dataclass
class Site:
    url: str
    db: Database
    escalations: list[str]
    key: str
    """rita's annotator key."""


@pytest.fixture
def site(database_url: str, tmp_path: Path) -> Iterator[Site]:
    """The review server on a free loopback port, in a thread, on a fresh store."""
    db = Database(database_url)
    escalations = seed_escalations(db, 2)
    attention = load_attention(write_attention(tmp_path / "checks.jsonl", ATTENTION[:1]))
    # seed 1: "rita"'s draws are 0.938, 0.017, 0.796 against the 0.2 rate, so she gets
    # the first escalation, the attention check, then the second escalation.
    queue = ReviewQueue(db, attention=attention, attention_rate=0.2, seed=1)
    key = AnnotatorRegistry(db).add("rita")
    server, sock = review_server(queue, host="127.0.0.1", port=0)
    port = sock.getsockname()[1]
    try:
        with serving(server, sock):
            yield Site(f"http://127.0.0.1:{port}", db, escalations, key)
    finally:
        db.close()


def _votes(db: Database) -> list[tuple[str, str, str, bool, str | None]]:
    with db.session() as session:
        rows = session.scalars(select(ReviewVoteRow).order_by(ReviewVoteRow.created_at)).all()
        assert all(row.seconds is not None and row.seconds >= 0 for row in rows)
        return [
            (row.item_key, row.annotator, row.label, row.is_attention, row.expected_label)
            for row in rows
        ]


@needs_chromium
def test_label_items_with_the_keyboard(site: Site, tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    assert shutil.which(CHROMIUM), SKIP_REASON  # TRIBUNAL_REQUIRE_BROWSER: missing fails
    e1, e2 = site.escalations
    screenshot = Path(os.environ.get("REVIEW_SCREENSHOT", tmp_path / "review.png"))
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 860})
            # A CSP violation or a script error shows up here.
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on(
                "console",
                lambda message: problems.append(message.text) if message.type == "error" else None,
            )
            page.goto(site.url + "/")
            message, query, progress = (
                page.locator("#message"),
                page.locator("#query"),
                page.locator("#progress"),
            )
            expect(message).to_have_text("Sign in with your annotator key to start.")
            page.fill("#key", site.key)
            page.press("#key", "Enter")
            expect(page.locator("#name")).to_have_text("rita")

            # Item 1: the first escalation, both agents' quotes highlighted.
            expect(query).to_have_text(ESCALATIONS[0].query)
            expect(page.locator("#passage mark")).to_have_text(
                ["incubation period is 2 to 14 days", "Most people recover"]
            )
            expect(page.locator("#answers li")).to_have_text(["2 to 14 days"])
            expect(page.locator("#rounds h3")).to_have_text(["Round 1", "Round 2"])
            expect(page.locator("#rounds .turn .who").first).to_have_text(
                "Agent A · qwen2.5-0.5b: relevant"
            )
            # Markup in a rationale is shown as text, never rendered.
            expect(page.locator("#rounds .turn p").nth(1)).to_have_text(
                "round 1: it is about <i>recovery</i>, not the query"
            )
            assert page.locator("#rounds i").count() == 0
            expect(page.locator("#missing")).to_be_hidden()
            screenshot.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(screenshot), full_page=True)
            page.keyboard.press("r")

            # Item 2: the attention check, served like any item.
            expect(progress).to_have_text("1 labelled")
            expect(query).to_have_text(str(ATTENTION[0]["query"]))
            expect(page.locator("#passage mark")).to_have_text(["Paris is the capital"])
            expect(page.locator("#rounds h3")).to_have_text(["Round 1", "Round 2"])
            page.keyboard.press("0")
            expect(progress).to_have_text("2 labelled")
            # The two keyboard votes are stored.
            assert _votes(site.db) == [
                (e1, "rita", "relevant", False, None),
                ("attention:a1", "rita", "irrelevant", True, "relevant"),
            ]

            # Item 3: upper-case quote matched case-insensitively; a misquote is listed.
            expect(query).to_have_text(ESCALATIONS[1].query)
            expect(page.locator("#passage mark")).to_have_text(
                ["the risk that they spread it is low"]
            )
            expect(page.locator("#missing-list li")).to_have_text(["cats are popular pets"])
            expect(page.locator("#rounds .found")).to_have_text(
                ["quote check: found", "quote check: not found"] * 2
            )
            page.keyboard.press("?")
            expect(page.locator("#help")).to_be_visible()
            page.keyboard.press("i")  # ignored while the help is open
            page.keyboard.press("Escape")
            expect(page.locator("#help")).to_be_hidden()
            expect(progress).to_have_text("2 labelled")
            page.keyboard.press("I")
            expect(progress).to_have_text("3 labelled")
            expect(message).to_have_text(
                "The queue is empty: nothing is left for you to label. Thank you!"
            )

            # The sign-in survives a reload (an HttpOnly cookie: the script never sees it).
            page.reload()
            expect(page.locator("#name")).to_have_text("rita")
            expect(progress).to_have_text("3 labelled")
            expect(message).to_contain_text("The queue is empty")
        finally:
            browser.close()
    assert problems == []
    assert _votes(site.db)[2] == (e2, "rita", "irrelevant", False, None)
    assert screenshot.stat().st_size > 10_000


def _request(
    url: str, data: bytes | None = None, content_type: str = "", key: str = ""
) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
    if content_type:
        request.add_header("Content-Type", content_type)
    request.add_header(CSRF_HEADER, "1")
    if key:
        request.add_header("Cookie", f"{SESSION_COOKIE}={key}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_api_refuses_bad_requests_and_hides_attention(site: Site) -> None:
    e1, _ = site.escalations
    with urllib.request.urlopen(site.url + "/", timeout=10) as response:
        csp = response.headers["Content-Security-Policy"]
    assert "script-src 'sha256-" in csp
    assert "frame-ancestors 'none'" in csp
    vote = json.dumps({"item": e1, "label": "relevant"}).encode()
    assert _request(site.url + "/api/vote", vote, "text/plain", site.key) == (
        415,
        {"error": "send the body as application/json"},
    )
    status, body = _request(site.url + "/api/next")
    assert status == 401
    assert "add-annotator" in body["error"]
    bad = json.dumps({"item": e1, "label": "yes"}).encode()
    status, body = _request(site.url + "/api/vote", bad, "application/json", site.key)
    assert (status, body["field"]) == (400, "label")
    assert _request(site.url + "/api/vote", vote, "application/json", site.key) == (
        200,
        {"stored": True, "label": "relevant", "labelled": 1},
    )
    status, body = _request(site.url + "/api/vote", vote, "application/json", site.key)
    assert status == 409
    status, stats = _request(site.url + "/api/stats", key=site.key)
    assert status == 200
    assert stats["items"] == {"waiting": 1, "in_progress": 1, "done": 0}
    assert stats["annotators"] == [{"annotator": "rita", "votes": 1}]
