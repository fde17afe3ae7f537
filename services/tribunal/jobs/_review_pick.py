"""An audited FALLBACK's review: *which entry, if any, answers this query?*

An audited ACCEPT asks whether the served entry answers the query. A fallback served no
entry, so re-certifying on it (``tribunal calibrate --from-audit``) needs its right entry,
if any: the page offers the decision's candidates (with their questions) and a search of
the collection's stored entries by id or text, and the annotator picks one — the vote is
``relevant`` with that ``entry_id`` — or says none answers (``irrelevant``). The picked
entry is also proposed as a phrasing link of the query (pending an admin), as the link
list of the page does, so one review serves both.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import InvalidArgumentError, NotFoundError
from ..core.storage import Database
from ._review import ReviewItem, ReviewQueue, VoteResult
from ._review_audit import no_entry_here

if TYPE_CHECKING:
    from ..retrieval import PhrasingLinks

__all__ = [
    "PICK_QUESTION",
    "EntrySearch",
    "entry_search",
    "pick_view",
    "pick_vote",
    "search_query",
]

PICK_QUESTION = "Which entry, if any, answers this query?"
EntrySearch = Callable[[str, str, int], list[dict[str, str]]]
"""(collection, text, limit) -> stored entries ``{"id", "question"}`` matching the text."""
_MAX_SEARCH = 50


def pick_view(
    db: Database,
    item: ReviewItem,
    questions: Callable[[str, Sequence[str]], Mapping[str, str]] | None,
) -> dict[str, Any] | None:
    """What the page shows to pick an entry for an audited fallback (None for any other
    item): the question, the collection, the candidates with their questions, the entry
    shown in the passage."""
    if not item.audit_id:
        return None
    history = item.history
    collection = str(history.get("collection", ""))
    shown = str(history.get("kb_entry_id", ""))
    listed = history.get("candidates")
    if isinstance(listed, list):  # an attention check in this form lists its own
        ids = [str(i) for i in listed]
    else:
        try:
            ids = list(db.decision(item.audit_id).candidate_ids)
        except NotFoundError:
            ids = []
    if shown and shown not in ids:
        ids.insert(0, shown)
    found = dict(questions(collection, ids)) if questions is not None and ids else {}
    return {
        "question": PICK_QUESTION,
        "collection": collection,
        "shown": shown,
        "candidates": [{"id": i, "question": found.get(i, "")} for i in ids],
    }


def pick_vote(
    queue: ReviewQueue,
    annotator: str,
    token: str,
    label: str,
    *,
    seconds: float | None,
    entry_id: str | None,
    questions: Callable[[str, Sequence[str]], Mapping[str, str]] | None,
    links: PhrasingLinks | None,
) -> VoteResult:
    """A vote, with its picked entry when it has one: the item must be an audited
    fallback (the same refusal for any other item, attention checks included), the entry
    must exist in the item's collection (a typo is not a label), and a stored pick is also
    proposed as a phrasing link of the query (an admin approves)."""
    target = None
    if entry_id is not None:
        target = queue.pick_target(token)
        if target is None:
            no_entry_here(entry_id)
    if target is not None and entry_id is not None and questions is not None:
        collection = target[0]
        if entry_id.strip() not in questions(collection, [entry_id.strip()]):
            raise InvalidArgumentError(
                f"no entry {entry_id.strip()!r} in collection {collection!r}: pick a "
                "candidate or search the KB",
                field="entry_id",
            )
    result = queue.vote(annotator, token, label, seconds=seconds, entry_id=entry_id)
    audit_id = target[1] if target is not None else ""
    if result.stored and audit_id and entry_id is not None and links is not None:
        links.propose(annotator, audit_id=audit_id, entry_id=entry_id.strip())
    return result


def search_query(params: Mapping[str, str]) -> tuple[str, str, int]:
    """(collection, text, limit) of ``GET /api/entries``.

    Raises:
        InvalidArgumentError: no collection or text, or a bad limit.
    """
    collection = params.get("collection", "").strip()
    text = params.get("q", "").strip()
    if not collection:
        raise InvalidArgumentError("give the collection to search", field="collection")
    if not text or len(text) > 200:
        raise InvalidArgumentError(
            "give q: an entry id or words of its text (at most 200 characters)", field="q"
        )
    raw = params.get("limit", "10")
    if not raw.isdigit() or not 1 <= int(raw) <= _MAX_SEARCH:
        raise InvalidArgumentError(f"limit must be 1 to {_MAX_SEARCH}", field="limit")
    return collection, text, int(raw)


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def search_stored(path: Path, text: str, limit: int) -> list[dict[str, str]]:
    """Stored entries whose id is ``text``, then those whose record contains it
    (case-insensitive), read-only; a missing file gives nothing."""
    if not path.is_file():
        return []
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=5.0)
    try:
        rows = db.execute(
            "SELECT id, record FROM entries WHERE id = ? OR record LIKE ? ESCAPE '\\' "
            "ORDER BY id = ? DESC, id LIMIT ?",
            (text, _like(text), text, limit),
        ).fetchall()
    finally:
        db.close()
    return [{"id": str(i), "question": str(json.loads(r).get("question", ""))} for i, r in rows]


def entry_search(root: Path) -> EntrySearch:
    """The search of stored entries in the collections under ``root``
    (``data_dir/retrieval``), read-only: what the page offers to pick a fallback's entry."""
    from ..retrieval._validation import check_collection_name

    def search(collection: str, text: str, limit: int) -> list[dict[str, str]]:
        check_collection_name(collection)  # a name from a request never walks out of root
        return search_stored(root / collection / "entries.sqlite3", text, limit)

    return search
