"""The review web page and its JSON API (Starlette, served by uvicorn).

``GET /`` is one static page (vanilla JS and CSS inline, no build step);
``GET /api/next?annotator=NAME[&skip=TOKEN,...]`` the annotator's next item,
``POST /api/vote`` ``{"annotator", "item", "label", "seconds"}`` records a vote,
``GET /api/stats`` queue progress. The page renders every value with
``textContent``, never as HTML, so a query or quote cannot inject markup; the
Content-Security-Policy admits only the page's own inline script and style (by
hash). Attention checks look like any item here: the API never says which items
are checks, nor whether a vote was right (``tribunal review stats`` does).
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import socket
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..core import ErrorCode, InvalidArgumentError, TribunalError
from ._review import ReviewQueue, item_view

__all__ = ["PAGE", "create_app", "review_server"]

log = logging.getLogger(__name__)

_STATUS = {
    ErrorCode.INVALID_ARGUMENT: 400,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.FAILED_PRECONDITION: 409,
    ErrorCode.RESOURCE_EXHAUSTED: 429,
    ErrorCode.UNAVAILABLE: 503,
}

_STYLE = """
:root { font-family: system-ui, sans-serif; color: #1b1b1b; background: #f6f6f4; }
body { margin: 0; }
header { display: flex; gap: 1rem; align-items: center; padding: .6rem 1.2rem;
  background: #23324a; color: #fff; flex-wrap: wrap; }
header h1 { font-size: 1.1rem; margin: 0 1rem 0 0; }
header input { font-size: 1rem; padding: .2rem .4rem; }
#progress { margin-left: auto; font-weight: 600; }
main { display: grid; grid-template-columns: minmax(0, 3fr) minmax(0, 2fr); gap: 1.2rem;
  align-items: start;
  padding: 1rem 1.2rem; max-width: 1400px; }
#message { grid-column: 1 / -1; margin: 0; font-size: 1.05rem; }
#message:empty { display: none; }
section { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: .4rem 1rem 1rem; }
h2 { font-size: .8rem; text-transform: uppercase; letter-spacing: .06em; color: #556;
  margin: 1rem 0 .3rem; }
#query { font-size: 1.2rem; font-weight: 600; margin: 0; }
#passage { line-height: 1.55; white-space: pre-wrap; margin: 0; }
mark { background: #ffe066; padding: 0 .1em; }
.missing { color: #a33; }
.actions { display: flex; gap: .6rem; margin-top: 1rem; align-items: center; flex-wrap: wrap; }
.actions button { font-size: 1rem; padding: .5rem 1rem; border-radius: 5px;
  border: 1px solid #888; background: #fafafa; cursor: pointer; }
#relevant { border-color: #2b7a3d; }
#irrelevant { border-color: #a33; }
kbd { font-family: ui-monospace, monospace; border: 1px solid #aaa; border-radius: 3px;
  padding: 0 .3em; background: #eee; color: #222; }
.instruction { margin: 1rem 0 0; color: #333; }
.round h3 { font-size: .95rem; margin: .8rem 0 .3rem; }
.turn { border-left: 4px solid #bbb; padding: .2rem .7rem; margin: .4rem 0; }
.turn.relevant { border-color: #2b7a3d; }
.turn.irrelevant { border-color: #a33; }
.turn .who { font-weight: 600; }
.turn blockquote { margin: .3rem 0; font-style: italic; }
.turn .found { font-size: .8rem; color: #666; }
dialog { border-radius: 6px; border: 1px solid #888; }
dialog td { padding: .15rem .6rem; }
@media (max-width: 900px) { main { grid-template-columns: 1fr; } }
"""

_SCRIPT = """
"use strict";
const STORE = "tribunal.review.annotator";
const $ = (id) => document.getElementById(id);
const state = { annotator: "", item: null, shownAt: 0, busy: false, skipped: [] };

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  return node;
}
function say(text) { $("message").textContent = text; }
function progress(count) { $("progress").textContent = count + " labelled"; }

async function api(path, options) {
  const response = await fetch(path, options);
  let body = {};
  try { body = await response.json(); } catch (error) { body = {}; }
  if (!response.ok) {
    const failure = new Error(body.error || ("HTTP " + response.status));
    failure.status = response.status;
    throw failure;
  }
  return body;
}

async function next() {
  if (!state.annotator) { say("Enter your name to start."); $("annotator").focus(); return; }
  const params = new URLSearchParams({ annotator: state.annotator });
  if (state.skipped.length) params.set("skip", state.skipped.join(","));
  state.busy = true;
  try {
    const body = await api("/api/next?" + params.toString());
    progress(body.labelled);
    show(body.item);
  } catch (error) {
    say("Error: " + error.message);
  } finally {
    state.busy = false;
  }
}

function show(item) {
  state.item = item;
  $("item").hidden = !item;
  $("debate").hidden = !item;
  if (!item) {
    say(state.skipped.length
      ? "No more items for now. You skipped " + state.skipped.length
        + "; reload the page to see them again."
      : "The queue is empty: nothing is left for you to label. Thank you!");
    return;
  }
  say("");
  $("query").textContent = item.query;
  $("answers").replaceChildren(...item.answers.map((answer) => el("li", answer)));
  $("no-answers").hidden = item.answers.length > 0;
  $("passage").replaceChildren(...item.passage.map(
    (part) => part.mark ? el("mark", part.text) : document.createTextNode(part.text)));
  $("missing").hidden = item.missing_quotes.length === 0;
  $("missing-list").replaceChildren(
    ...item.missing_quotes.map((quote) => el("li", quote, "missing")));
  $("outcome").textContent = item.outcome ? "(" + item.outcome + ")" : "";
  const rounds = item.rounds.map((round) => {
    const box = el("div", undefined, "round");
    box.append(el("h3", "Round " + round.number));
    for (const turn of round.turns) {
      const card = el("div", undefined, "turn " + turn.label);
      const model = turn.model ? " · " + turn.model : "";
      const who = el("div", "Agent " + turn.agent + model + ": ", "who");
      who.append(el("span", turn.label || "no label"));
      card.append(who);
      if (turn.evidence) {
        card.append(el("blockquote", "“" + turn.evidence + "”"));
        const check = turn.evidence_found ? "found" : "not found";
        card.append(el("div", "quote check: " + check, "found"));
      }
      if (turn.rationale) card.append(el("p", turn.rationale));
      box.append(card);
    }
    return box;
  });
  $("rounds").replaceChildren(...rounds);
  $("no-debate").hidden = rounds.length > 0;
  state.shownAt = performance.now();
}

async function vote(label) {
  if (!state.item || state.busy) return;
  state.busy = true;
  const seconds = Math.round((performance.now() - state.shownAt) / 100) / 10;
  try {
    const body = await api("/api/vote", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ annotator: state.annotator, item: state.item.item, label, seconds }),
    });
    progress(body.labelled);
  } catch (error) {
    // 409/404: the item closed meanwhile (enough votes); anything else: stay on it.
    if (error.status !== 409 && error.status !== 404) {
      say("Error: " + error.message);
      state.busy = false;
      return;
    }
  }
  state.busy = false;
  await next();
}

function skip() {
  if (!state.item || state.busy) return;
  state.skipped.push(state.item.item);
  next();
}

function toggleHelp() {
  const help = $("help");
  if (help.open) help.close(); else help.showModal();
}

$("who").addEventListener("submit", (event) => {
  event.preventDefault();
  const name = $("annotator").value.trim();
  if (!name) return;
  state.annotator = name;
  state.skipped = [];
  localStorage.setItem(STORE, name);
  $("annotator").blur();
  next();
});
$("relevant").addEventListener("click", () => vote("relevant"));
$("irrelevant").addEventListener("click", () => vote("irrelevant"));
$("skip").addEventListener("click", skip);
$("help-button").addEventListener("click", toggleHelp);
$("help-close").addEventListener("click", () => $("help").close());

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  // Typing a name must not label anything.
  if (event.target instanceof HTMLInputElement) return;
  const key = event.key;
  if (key === "?") { toggleHelp(); event.preventDefault(); return; }
  if ($("help").open) return;
  if (key === "r" || key === "R" || key === "1") vote("relevant");
  else if (key === "i" || key === "I" || key === "0") vote("irrelevant");
  else if (key === "s" || key === "S") skip();
  else return;
  event.preventDefault();
});

state.annotator = localStorage.getItem(STORE) || "";
$("annotator").value = state.annotator;
next();
"""

_BODY = """
<header>
  <h1>Tribunal review</h1>
  <form id="who">
    <label>Annotator <input id="annotator" name="annotator" maxlength="128"
      autocomplete="username" required></label>
    <button type="submit">Start</button>
  </form>
  <span id="progress" aria-live="polite">0 labelled</span>
  <button id="help-button" type="button" title="Keyboard shortcuts">?</button>
</header>
<main>
  <p id="message" role="status"></p>
  <section id="item" hidden>
    <h2>Query</h2>
    <p id="query"></p>
    <h2>Answers</h2>
    <ul id="answers"></ul>
    <p id="no-answers" hidden>(no reference answer)</p>
    <h2>Passage <small>(quotes the agents cited are highlighted)</small></h2>
    <p id="passage"></p>
    <div id="missing" hidden>
      <h2>Quoted by an agent but not in passage</h2>
      <ul id="missing-list"></ul>
    </div>
    <p class="instruction">Does the passage contain enough evidence to support at least one
      of the answers to the query?</p>
    <div class="actions">
      <button id="relevant" type="button"><kbd>R</kbd> Relevant</button>
      <button id="irrelevant" type="button"><kbd>I</kbd> Irrelevant</button>
      <button id="skip" type="button"><kbd>S</kbd> Skip</button>
    </div>
  </section>
  <section id="debate" hidden>
    <h2>Debate history <span id="outcome"></span></h2>
    <p id="no-debate" hidden>(no debate recorded for this item)</p>
    <div id="rounds"></div>
  </section>
</main>
<dialog id="help">
  <h2>Keyboard shortcuts</h2>
  <table>
    <tr><td><kbd>R</kbd> or <kbd>1</kbd></td><td>relevant</td></tr>
    <tr><td><kbd>I</kbd> or <kbd>0</kbd></td><td>irrelevant</td></tr>
    <tr><td><kbd>S</kbd></td><td>skip (for this session)</td></tr>
    <tr><td><kbd>?</kbd></td><td>this help</td></tr>
  </table>
  <button id="help-close" type="button">Close</button>
</dialog>
"""


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode()).digest()).decode() + "'"


PAGE = (
    '<!doctype html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
    '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
    f"<title>Tribunal review</title>\n<style>{_STYLE}</style>\n</head>\n<body>{_BODY}"
    f"<script>{_SCRIPT}</script>\n</body>\n</html>\n"
)
"""The whole page, as served."""

_HEADERS = {
    # Only this page's own script and style run; the API is same-origin.
    "Content-Security-Policy": (
        f"default-src 'none'; script-src {_csp_hash(_SCRIPT)}; style-src {_csp_hash(_STYLE)}; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _error(exc: TribunalError) -> JSONResponse:
    status = _STATUS.get(exc.code, 500)
    message = exc.message if status != 500 else "internal error"
    return JSONResponse({"error": message, "field": exc.field}, status_code=status)


def create_app(queue: ReviewQueue) -> Starlette:
    """The review app on ``queue``. Endpoints are sync: Starlette runs them in its
    thread pool, which suits the blocking database calls."""

    def page(_request: Request) -> Response:
        return HTMLResponse(PAGE, headers=_HEADERS)

    def next_item(request: Request) -> Response:
        try:
            annotator = request.query_params.get("annotator", "")
            skip = [t for t in request.query_params.get("skip", "").split(",") if t]
            item = queue.next_item(annotator, exclude=skip)
            return JSONResponse(
                {
                    "item": item_view(item) if item is not None else None,
                    "labelled": queue.labelled(annotator),
                },
                headers={"Cache-Control": "no-store"},
            )
        except TribunalError as exc:
            return _error(exc)

    async def vote(request: Request) -> Response:
        # JSON only: a cross-site HTML form cannot send application/json without a
        # CORS preflight, which this server never grants.
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"error": "send the vote as application/json"}, status_code=415)
        try:
            body = json.loads(await request.body())
        except ValueError:
            return _error(InvalidArgumentError("the body is not JSON"))
        try:
            fields = _vote_fields(body)
            result = await run_in_threadpool(
                queue.vote, fields[0], fields[1], fields[2], seconds=fields[3]
            )
        except TribunalError as exc:
            return _error(exc)
        return JSONResponse(
            {"stored": result.stored, "label": result.label, "labelled": result.labelled}
        )

    def stats(_request: Request) -> Response:
        try:
            summary = queue.stats()
        except TribunalError as exc:
            return _error(exc)
        # Attention accuracy stays with the operator (`tribunal review stats`).
        summary["annotators"] = [
            {"annotator": entry["annotator"], "votes": entry["votes"]}
            for entry in summary["annotators"]
        ]
        summary.pop("votes", None)
        summary.pop("attention_votes", None)
        return JSONResponse(summary)

    def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/", page),
            Route("/api/next", next_item),
            Route("/api/vote", vote, methods=["POST"]),
            Route("/api/stats", stats),
            Route("/healthz", health),
        ]
    )


def _vote_fields(body: Any) -> tuple[str, str, str, float | None]:
    if not isinstance(body, dict):
        raise InvalidArgumentError("the vote must be a JSON object")
    values = [body.get(name) for name in ("annotator", "item", "label")]
    for name, value in zip(("annotator", "item", "label"), values, strict=True):
        if not isinstance(value, str):
            raise InvalidArgumentError(f"{name} must be a string", field=name)
    seconds = body.get("seconds")
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)):
        raise InvalidArgumentError("seconds must be a number", field="seconds")
    return (
        str(values[0]),
        str(values[1]),
        str(values[2]),
        float(seconds) if seconds is not None else None,
    )


def review_server(
    queue: ReviewQueue, *, host: str = "127.0.0.1", port: int = 8765
) -> tuple[uvicorn.Server, socket.socket]:
    """A uvicorn server for the app and its bound socket (port 0 picks a free port).

    The caller runs ``server.run(sockets=[sock])`` (blocking) and reads the port from
    ``sock.getsockname()``; binding first is what lets tests use a free port race-free.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise InvalidArgumentError(
            f"cannot listen on {host}:{port}: {exc.strerror}; pick another --port", field="port"
        ) from None
    config = uvicorn.Config(create_app(queue), log_level="warning", access_log=False)
    return uvicorn.Server(config), sock
