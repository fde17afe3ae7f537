"""Reviewed queries that teach the KB: a query linked to the entry that answers it.

A person on the review page links a gateway decision's query (one that fell back, or
any audited one) to the KB entry that answers it (:meth:`PhrasingLinks.propose`). An
admin then approves the link (:meth:`PhrasingLinks.approve`): the query becomes one more
phrasing of that entry (``KbEntry.questions``), written through :class:`AuditedWrites`
like every KB change (actor, entry versions before and after, the collection's version,
and the link in the change's detail) — or rejects it with a reason. Approved links are
labelled traffic (:meth:`PhrasingLinks.traffic`): ``{"query", "collection", "answers"}``
lines that ``tribunal calibrate --traffic`` and ``tribunal tune --traffic`` read.

The links live in the store at ``database_url`` (table ``kb_phrasing_links``, SQLite or
PostgreSQL), one row per (collection, entry, query): linking the same query to the same
entry again returns the existing link.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ..core import (
    FailedPreconditionError,
    InvalidArgumentError,
    NotFoundError,
    UnavailableError,
)
from ..core.storage import Database, KbPhrasingLinkRow
from ..kb import entry_sha256, phrasing_key
from ._change_audit import AuditedWrites
from ._store_files import stored_questions
from ._validation import check_collection_name

__all__ = ["LinkStatus", "PhrasingLink", "PhrasingLinks", "entry_questions"]

LinkStatus = Literal["pending", "approved", "rejected"]
_STATUSES: tuple[LinkStatus, ...] = ("pending", "approved", "rejected")
_MAX_ID_CHARS = 256  # the column's width (entry ids in kb_changes too)
_MAX_REASON_CHARS = 2_000
_MAX_ACTOR_CHARS = 128


def _query_sha256(text: str) -> str:
    return hashlib.sha256(phrasing_key(text).encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class PhrasingLink:
    """One reviewed query linked to the entry that answers it."""

    id: str
    collection: str
    entry_id: str
    query: str
    audit_id: str
    """The gateway decision it came from (empty when added by hand)."""
    proposed_by: str
    status: LinkStatus
    created_at: dt.datetime | None = None
    decided_by: str = ""
    decided_at: dt.datetime | None = None
    reason: str = ""
    kb_version: int = 0
    """The collection's version once the approved phrasing was written."""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "collection": self.collection,
            "entry_id": self.entry_id,
            "query": self.query,
            "audit_id": self.audit_id,
            "proposed_by": self.proposed_by,
            "status": self.status,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "decided_by": self.decided_by,
            "decided_at": self.decided_at.isoformat() if self.decided_at else None,
            "reason": self.reason,
            "kb_version": self.kb_version,
        }


def _link(row: KbPhrasingLinkRow) -> PhrasingLink:
    status = row.status if row.status in _STATUSES else "pending"
    return PhrasingLink(
        id=row.id,
        collection=row.collection,
        entry_id=row.entry_id,
        query=row.query,
        audit_id=row.audit_id,
        proposed_by=row.proposed_by,
        status=status,  # type: ignore[arg-type]
        created_at=row.created_at,
        decided_by=row.decided_by,
        decided_at=row.decided_at,
        reason=row.reason,
        kb_version=int(row.kb_version),
    )


def _check_text(value: str, name: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgumentError(f"{name} is empty", field=name)
    if len(value) > limit:
        raise InvalidArgumentError(
            f"{name} has {len(value)} characters; the limit is {limit}", field=name
        )
    return value.strip()


class PhrasingLinks:
    """The ``kb_phrasing_links`` table of a store.

    Args:
        db: The store (its migrations create the table).
        max_query_chars: Longest query that may become a phrasing
            (``retrieval.max_question_chars``).
    """

    def __init__(self, db: Database, *, max_query_chars: int) -> None:
        self.db = db
        self.max_query_chars = max_query_chars

    # -- proposing ---------------------------------------------------------------------
    def propose(self, proposer: str, *, audit_id: str, entry_id: str) -> tuple[PhrasingLink, bool]:
        """Link the query of gateway decision ``audit_id`` to ``entry_id`` of the collection
        it asked. Returns the link and whether it is new (False: that query was already
        linked to that entry, whatever its status).

        Raises:
            InvalidArgumentError: an empty or too long id or query.
            NotFoundError: no such decision.
            FailedPreconditionError: the decision is not an ``Answer`` on a collection.
        """
        audit_id = _check_text(audit_id, "audit_id", 32)
        decision = self.db.decision(audit_id)
        if decision.kind != "answer" or not decision.collection:
            raise FailedPreconditionError(
                f"decision {audit_id} is a {decision.kind!r} decision without a collection: "
                "only Answer queries can be linked to a KB entry",
                field="audit_id",
            )
        return self.add(
            proposer,
            collection=decision.collection,
            entry_id=entry_id,
            query=decision.query,
            audit_id=audit_id,
        )

    def add(
        self,
        proposer: str,
        *,
        collection: str,
        entry_id: str,
        query: str,
        audit_id: str = "",
    ) -> tuple[PhrasingLink, bool]:
        """Record a pending link (see :meth:`propose`); idempotent per (collection, entry,
        query with case and spacing normalised)."""
        check_collection_name(collection)
        entry_id = _check_text(entry_id, "entry_id", _MAX_ID_CHARS)
        query = _check_text(query, "query", self.max_query_chars)
        proposer = _check_text(proposer, "proposed_by", _MAX_ACTOR_CHARS)
        digest = _query_sha256(query)
        row = KbPhrasingLinkRow(
            id=uuid.uuid4().hex,
            created_at=dt.datetime.now(dt.UTC),
            collection=collection,
            entry_id=entry_id,
            query=query,
            query_sha256=digest,
            audit_id=audit_id,
            proposed_by=proposer,
            status="pending",
            decided_by="",
            decided_at=None,
            reason="",
            kb_version=0,
        )
        try:
            with self.db.session() as session:
                session.add(row)
                session.flush()
                return _link(row), True
        except UnavailableError as exc:  # the store wraps a unique-key violation
            if not _is_duplicate(exc):
                raise
        existing = self._find(collection, entry_id, digest)
        if existing is None:  # pragma: no cover - deleted between the two statements
            raise FailedPreconditionError("the link changed meanwhile; try again")
        return existing, False

    def _find(self, collection: str, entry_id: str, digest: str) -> PhrasingLink | None:
        with self.db.session() as session:
            row = session.scalars(
                select(KbPhrasingLinkRow).where(
                    KbPhrasingLinkRow.collection == collection,
                    KbPhrasingLinkRow.entry_id == entry_id,
                    KbPhrasingLinkRow.query_sha256 == digest,
                )
            ).first()
            return _link(row) if row is not None else None

    # -- reading -----------------------------------------------------------------------
    def get(self, link_id: str) -> PhrasingLink:
        """One link. Raises NotFoundError."""
        with self.db.session() as session:
            row = session.get(KbPhrasingLinkRow, link_id)
            if row is None:
                raise NotFoundError(
                    f"no phrasing link {link_id!r}: `tribunal kb phrasings list` shows them",
                    field="link",
                )
            return _link(row)

    def links(
        self,
        *,
        collection: str | None = None,
        status: LinkStatus | None = None,
        limit: int = 1000,
    ) -> list[PhrasingLink]:
        """Links, oldest first (of one collection / status when given)."""
        if status is not None and status not in _STATUSES:
            raise InvalidArgumentError(
                f"status {status!r}: use one of {', '.join(_STATUSES)}", field="status"
            )
        statement = select(KbPhrasingLinkRow)
        if collection is not None:
            statement = statement.where(KbPhrasingLinkRow.collection == collection)
        if status is not None:
            statement = statement.where(KbPhrasingLinkRow.status == status)
        statement = statement.order_by(KbPhrasingLinkRow.created_at, KbPhrasingLinkRow.id)
        with self.db.session() as session:
            return [_link(row) for row in session.scalars(statement.limit(limit))]

    def linked_decisions(self, audit_ids: Sequence[str]) -> dict[str, list[str]]:
        """Per decision id, the entries its query is linked to (any status)."""
        if not audit_ids:
            return {}
        statement = select(KbPhrasingLinkRow.audit_id, KbPhrasingLinkRow.entry_id).where(
            KbPhrasingLinkRow.audit_id.in_(list(audit_ids))
        )
        out: dict[str, list[str]] = {}
        with self.db.session() as session:
            for audit_id, entry_id in session.execute(statement):
                out.setdefault(audit_id, []).append(entry_id)
        return out

    # -- deciding ----------------------------------------------------------------------
    def approve(
        self, actor: str, link_id: str, writes: AuditedWrites, *, note: str = ""
    ) -> PhrasingLink:
        """Add the link's query to its entry's phrasings (an audited KB change) and mark the
        link approved. A query the entry already has as a phrasing changes nothing in the
        KB; the link is approved all the same.

        Raises:
            NotFoundError: no such link, or its entry (or collection) is gone.
            FailedPreconditionError: the link was decided already, or its entry changed
                while this approval read and rewrote it (nothing written: approve again).
            InvalidArgumentError: the entry would exceed ``retrieval.max_questions_per_item``.
        """
        link = self._pending(link_id)
        note = note.strip()[:_MAX_REASON_CHARS]
        kb = writes.kb
        if link.collection not in kb.collection_names():
            raise NotFoundError(
                f"collection {link.collection!r} does not exist any more", field="collection"
            )
        collection = kb.collection(link.collection)
        entry = collection.entries([link.entry_id]).get(link.entry_id)
        if entry is None:
            raise NotFoundError(
                f"entry {link.entry_id!r} is not in collection {link.collection!r} (deleted or "
                "never there): reject the link, or link the query to another entry",
                field="entry_id",
            )
        known = {phrasing_key(text) for text in entry.phrasings()}
        if phrasing_key(link.query) in known:
            version = collection.store.last_seq()
        else:
            updated = replace(entry, questions=(*entry.questions, link.query))
            result = writes.upsert(
                actor,
                link.collection,
                [updated],
                detail={
                    "phrasing_link": link.id,
                    "phrasing": link.query,
                    "audit_id": link.audit_id,
                },
                expected_before={entry.id: entry_sha256(entry)},
            )
            version = result.kb_version
        return self._decide(link.id, actor, "approved", note, version)

    def approve_entry(
        self, actor: str, link_ids: Sequence[str], writes: AuditedWrites, *, note: str = ""
    ) -> list[PhrasingLink]:
        """Approve several pending links of *one* entry in one audited KB change (one
        upsert of the entry with every new phrasing; the change's detail names each link).
        Phrasings the entry has already change nothing; their links are approved all the
        same. Same errors as :meth:`approve`; all the links must name one entry."""
        links = [self._pending(link_id) for link_id in link_ids]
        if not links:
            return []
        targets = {(link.collection, link.entry_id) for link in links}
        if len(targets) != 1:
            raise InvalidArgumentError(
                f"the links name {len(targets)} entries; approve one entry's links at a time",
                field="links",
            )
        name, entry_id = targets.pop()
        note = note.strip()[:_MAX_REASON_CHARS]
        kb = writes.kb
        if name not in kb.collection_names():
            raise NotFoundError(f"collection {name!r} does not exist any more", field="collection")
        collection = kb.collection(name)
        entry = collection.entries([entry_id]).get(entry_id)
        if entry is None:
            raise NotFoundError(
                f"entry {entry_id!r} is not in collection {name!r} (deleted or never there): "
                "reject the links, or link the queries to another entry",
                field="entry_id",
            )
        known = {phrasing_key(text) for text in entry.phrasings()}
        new: list[PhrasingLink] = []
        for link in links:
            key = phrasing_key(link.query)
            if key not in known:
                known.add(key)
                new.append(link)
        if new:
            updated = replace(entry, questions=(*entry.questions, *(link.query for link in new)))
            result = writes.upsert(
                actor,
                name,
                [updated],
                detail={
                    "phrasing_links": [link.id for link in new],
                    "phrasings": [link.query for link in new],
                },
                expected_before={entry.id: entry_sha256(entry)},
            )
            version = result.kb_version
        else:
            version = collection.store.last_seq()
        return [self._decide(link.id, actor, "approved", note, version) for link in links]

    def reject(self, actor: str, link_id: str, reason: str) -> PhrasingLink:
        """Mark a pending link rejected, with the reason (the KB is not changed).

        Raises:
            InvalidArgumentError: no reason.
            NotFoundError / FailedPreconditionError: as :meth:`approve`.
        """
        reason = _check_text(reason, "reason", _MAX_REASON_CHARS)
        self._pending(link_id)
        return self._decide(link_id, actor, "rejected", reason, 0)

    def _pending(self, link_id: str) -> PhrasingLink:
        link = self.get(link_id)
        if link.status != "pending":
            raise FailedPreconditionError(
                f"link {link_id} was {link.status} by {link.decided_by} already", field="link"
            )
        return link

    def _decide(
        self, link_id: str, actor: str, status: LinkStatus, reason: str, version: int
    ) -> PhrasingLink:
        actor = _check_text(actor, "actor", _MAX_ACTOR_CHARS)
        with self.db.session() as session:
            row = session.get(KbPhrasingLinkRow, link_id, with_for_update=True)
            if row is None:
                raise NotFoundError(f"no phrasing link {link_id!r}", field="link")
            if row.status != "pending":
                raise FailedPreconditionError(
                    f"link {link_id} was {row.status} by {row.decided_by} meanwhile", field="link"
                )
            row.status = status
            row.decided_by = actor
            row.decided_at = dt.datetime.now(dt.UTC)
            row.reason = reason
            row.kb_version = version
            session.flush()
            return _link(row)

    # -- labelled traffic --------------------------------------------------------------
    def traffic(self, *, collection: str | None = None) -> list[dict[str, Any]]:
        """Approved links as labelled traffic, one line per (collection, query): ``{"query",
        "collection", "answers": [every entry it was linked to, sorted]}`` — the format
        ``tribunal calibrate --traffic`` reads."""
        grouped: dict[tuple[str, str], tuple[str, set[str]]] = {}
        for link in self.links(collection=collection, status="approved", limit=10_000_000):
            key = (link.collection, phrasing_key(link.query))
            grouped.setdefault(key, (link.query, set()))[1].add(link.entry_id)
        return [
            {"query": query, "collection": name, "answers": sorted(answers)}
            for (name, _), (query, answers) in sorted(grouped.items())
        ]


def entry_questions(root: Path) -> Callable[[str, Sequence[str]], dict[str, str]]:
    """A lookup of stored entries' questions in the collections under ``root``
    (``data_dir/retrieval``), read-only: what the review page shows beside a candidate."""

    def lookup(collection: str, entry_ids: Sequence[str]) -> dict[str, str]:
        check_collection_name(collection)  # a name from the store never walks out of root
        return stored_questions(root / collection / "entries.sqlite3", entry_ids)

    return lookup


def _is_duplicate(exc: Exception) -> bool:
    """A unique-key violation, raised as such or wrapped by the store."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, IntegrityError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
