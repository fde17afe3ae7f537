"""The review page itself: one HTML document with its style and script inline.

No build step and no third-party code: vanilla JS and CSS, every value rendered with
``textContent``. The Content-Security-Policy admits exactly this script and this
style, by their sha256, and lets the page call only its own origin.
"""

from __future__ import annotations

import base64
import hashlib

__all__ = ["HEADERS", "PAGE"]

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
.link-row { border-top: 1px solid #ccc; padding: .6rem 0; }
.link-row button { display: block; margin: .25rem 0; text-align: left; }
.link-query { font-weight: 600; margin: 0; }
@media (max-width: 900px) { main { grid-template-columns: 1fr; } }
"""

_SCRIPT = """
"use strict";
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
  const request = Object.assign({ credentials: "same-origin" }, options || {});
  request.headers = Object.assign({ "X-Tribunal-Review": "1" }, request.headers || {});
  const response = await fetch(path, request);
  let body = {};
  try { body = await response.json(); } catch (error) { body = {}; }
  if (response.status === 401) signedOut();
  if (!response.ok) {
    const failure = new Error(body.error || ("HTTP " + response.status));
    failure.status = response.status;
    throw failure;
  }
  return body;
}

function signedIn(name) {
  state.annotator = name;
  $("who").hidden = true;
  $("signed-in").hidden = false;
  $("name").textContent = name;
}

function signedOut() {
  state.annotator = "";
  state.item = null;
  $("who").hidden = false;
  $("signed-in").hidden = true;
  $("item").hidden = true;
  $("debate").hidden = true;
  $("links").hidden = true;
}

async function next() {
  if (!state.annotator) {
    say("Sign in with your annotator key to start.");
    $("key").focus();
    return;
  }
  const params = new URLSearchParams();
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
  showPick(item.pick);
  state.shownAt = performance.now();
}

// An audited fallback: which entry, if any, answers the query? (pick one, or none)
function pickButton(entry) {
  const text = entry.question ? entry.id + ": " + entry.question : entry.id;
  const button = el("button", "This one answers it → " + text);
  button.type = "button";
  button.addEventListener("click", () => vote("relevant", entry.id));
  return button;
}

function showPick(pick) {
  $("pick").hidden = !pick;
  $("yes-no").hidden = !!pick;
  $("yes-no-actions").hidden = !!pick;
  if (!pick) return;
  $("pick-question").textContent = pick.question;
  $("pick-candidates").replaceChildren(...pick.candidates.map(pickButton));
  $("pick-found").replaceChildren();
  $("pick-text").value = "";
}

async function searchEntries(event) {
  event.preventDefault();
  const pick = state.item && state.item.pick;
  const text = $("pick-text").value.trim();
  if (!pick || !text) return;
  try {
    const params = new URLSearchParams({ collection: pick.collection, q: text });
    const body = await api("/api/entries?" + params.toString());
    $("pick-found").replaceChildren(...body.entries.map(pickButton));
    if (!body.entries.length) $("pick-found").append(el("p", "(no entry found)"));
  } catch (error) {
    say("Error: " + error.message);
  }
}

async function vote(label, entryId) {
  if (!state.item || state.busy) return;
  state.busy = true;
  const seconds = Math.round((performance.now() - state.shownAt) / 100) / 10;
  try {
    const body = await api("/api/vote", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(entryId
        ? { item: state.item.item, label, seconds, entry_id: entryId }
        : { item: state.item.item, label, seconds }),
    });
    progress(body.labelled);
  } catch (error) {
    // 409/404: the item closed meanwhile, or this vote was already cast; else stay on it.
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

async function showLinks() {
  if (!state.annotator) { say("Sign in with your annotator key first."); return; }
  $("item").hidden = true;
  $("debate").hidden = true;
  $("links").hidden = false;
  try {
    const decision = encodeURIComponent($("link-decision").value);
    const body = await api("/api/linkable?decision=" + decision);
    $("link-list").replaceChildren(...body.decisions.map(linkRow));
    $("no-links").hidden = body.decisions.length > 0;
    say("");
  } catch (error) {
    say("Error: " + error.message);
  }
}

function linkRow(row) {
  const box = el("div", undefined, "link-row");
  box.append(el("p", row.query, "link-query"));
  const why = row.reason ? " (" + row.reason + ")" : "";
  box.append(el("div", row.collection + " · " + row.decision + why, "who"));
  const status = el("div", row.linked.length ? "linked to " + row.linked.join(", ") : "", "found");
  for (const candidate of row.candidates) {
    const text = candidate.question ? candidate.id + ": " + candidate.question : candidate.id;
    const button = el("button", "Answers it → " + text);
    button.type = "button";
    button.addEventListener("click", () => link(row, candidate.id, status));
    box.append(button);
  }
  const form = el("form");
  const input = el("input");
  input.placeholder = "another entry id";
  input.maxLength = 256;
  const submit = el("button", "Link");
  submit.type = "submit";
  form.append(input, submit);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    if (input.value.trim()) link(row, input.value.trim(), status);
  });
  box.append(form, status);
  return box;
}

async function link(row, entryId, status) {
  try {
    const body = await api("/api/link", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ audit_id: row.audit_id, entry_id: entryId }),
    });
    status.textContent = (body.created ? "linked to " : "already linked to ") + entryId
      + " (" + body.link.status + "; an admin approves it as a phrasing)";
  } catch (error) {
    status.textContent = "Error: " + error.message;
  }
}

function hideLinks() {
  $("links").hidden = true;
  next();
}

function toggleHelp() {
  const help = $("help");
  if (help.open) help.close(); else help.showModal();
}

$("who").addEventListener("submit", async (event) => {
  event.preventDefault();
  const key = $("key").value.trim();
  if (!key) return;
  try {
    const body = await api("/api/session", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ key }),
    });
    $("key").value = "";
    $("key").blur();
    state.skipped = [];
    signedIn(body.annotator);
    next();
  } catch (error) {
    say("Error: " + error.message);
  }
});
$("signout").addEventListener("click", async () => {
  try { await api("/api/session", { method: "DELETE" }); } catch (error) { /* signed out */ }
  signedOut();
  say("Signed out.");
});
$("relevant").addEventListener("click", () => vote("relevant"));
$("irrelevant").addEventListener("click", () => vote("irrelevant"));
$("pick-none").addEventListener("click", () => vote("irrelevant"));
$("pick-skip").addEventListener("click", skip);
$("pick-search").addEventListener("submit", searchEntries);
$("skip").addEventListener("click", skip);
$("help-button").addEventListener("click", toggleHelp);
$("links-button").addEventListener("click", showLinks);
$("links-back").addEventListener("click", hideLinks);
$("link-decision").addEventListener("change", showLinks);
$("help-close").addEventListener("click", () => $("help").close());

document.addEventListener("keydown", (event) => {
  if (event.ctrlKey || event.metaKey || event.altKey) return;
  // Typing a name must not label anything.
  if (event.target instanceof HTMLInputElement) return;
  const key = event.key;
  if (key === "?") { toggleHelp(); event.preventDefault(); return; }
  // An audited fallback is answered by picking an entry (or none), not by R / I.
  if (state.item && state.item.pick && key !== "s" && key !== "S") return;
  if ($("help").open || !$("links").hidden) return;
  if (key === "r" || key === "R" || key === "1") vote("relevant");
  else if (key === "i" || key === "I" || key === "0") vote("irrelevant");
  else if (key === "s" || key === "S") skip();
  else return;
  event.preventDefault();
});

api("/api/session")
  .then((body) => (body.annotator ? signedIn(body.annotator) : signedOut()), () => signedOut())
  .then(next);
"""

_BODY = """
<header>
  <h1>Tribunal review</h1>
  <form id="who">
    <label>Annotator key <input id="key" name="key" type="password" maxlength="256"
      autocomplete="current-password" required></label>
    <button type="submit">Sign in</button>
  </form>
  <span id="signed-in" hidden>Signed in as <strong id="name"></strong>
    <button id="signout" type="button">Sign out</button></span>
  <span id="progress" aria-live="polite">0 labelled</span>
  <button id="links-button" type="button"
    title="Link queries to the KB entry that answers them">Link queries</button>
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
    <p class="instruction" id="yes-no">Does the passage contain enough evidence to support at
      least one of the answers to the query?</p>
    <div id="pick" hidden>
      <p class="instruction" id="pick-question"></p>
      <div id="pick-candidates"></div>
      <form id="pick-search">
        <label>Search the KB <input id="pick-text" maxlength="200"
          placeholder="entry id or words"></label>
        <button type="submit">Search</button>
      </form>
      <div id="pick-found"></div>
      <div class="actions">
        <button id="pick-none" type="button">No entry answers it</button>
        <button id="pick-skip" type="button"><kbd>S</kbd> Skip</button>
      </div>
    </div>
    <div class="actions" id="yes-no-actions">
      <button id="relevant" type="button"><kbd>R</kbd> Relevant</button>
      <button id="irrelevant" type="button"><kbd>I</kbd> Irrelevant</button>
      <button id="skip" type="button"><kbd>S</kbd> Skip</button>
    </div>
  </section>
  <section id="links" hidden>
    <h2>Queries to link</h2>
    <p class="instruction">Which KB entry answers the query? A link becomes a new phrasing of
      that entry once an admin approves it.</p>
    <label>Decisions <select id="link-decision">
      <option value="FALLBACK">fell back</option>
      <option value="ACCEPT">accepted</option>
      <option value="ESCALATE">escalated</option>
      <option value="ANY">all</option>
    </select></label>
    <button id="links-back" type="button">Back to labelling</button>
    <p id="no-links" hidden>(no such queries)</p>
    <div id="link-list"></div>
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

HEADERS = {
    # Only this page's own script and style run; the API is same-origin.
    "Content-Security-Policy": (
        f"default-src 'none'; script-src {_csp_hash(_SCRIPT)}; style-src {_csp_hash(_STYLE)}; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
