"""Every KB write, audited: who changed which entry, from which version to which.

:class:`AuditedWrites` is the one way the services and the command line change a
knowledge base: it reads the entries' current versions (sha256 of their canonical
JSON, as the verification stores them), applies the write, and appends one
:class:`KbChange` per entry to the store's append-only ``kb_changes`` table (the
same database as the decisions' audit): actor (the credential's name), time,
collection, entry id, before/after sha256 and the collection's version (its change
counter) once the write was applied. A change of the collection's ``self_evidenced``
policy is recorded too (op ``policy``). ``tribunal kb history`` reads the trail.

Writes to one collection through one :class:`AuditedWrites` are serialised, so the
"before" versions it records are exact; another process writing the same entry at
the same moment could make its "before" stale (the versions after are always exact).
If the audit record cannot be written after the change was applied, the call fails
with UNAVAILABLE and the log carries the change, so it is never silently unaudited.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from ..core import FailedPreconditionError, UnavailableError
from ..core.storage import Database, KbChangeRow
from ..kb import KbEntry, entry_sha256
from ._knowledge_base import KnowledgeBase
from ._types import DeleteResult, UpsertResult
from ._validation import check_collection_name, check_delete_ids, check_entries

__all__ = ["AuditedWrites", "KbChange", "KbChangeLog"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class KbChange:
    """One audited change."""

    actor: str
    collection: str
    entry_id: str
    op: str
    """``upsert``, ``delete``, ``policy`` or ``model`` (the collection re-embedded)."""
    before_sha256: str = ""
    after_sha256: str = ""
    kb_version: int = 0
    detail: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    created_at: dt.datetime | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "created_at": self.created_at.isoformat() if self.created_at else None,
            "actor": self.actor,
            "collection": self.collection,
            "entry_id": self.entry_id,
            "op": self.op,
            "before_sha256": self.before_sha256,
            "after_sha256": self.after_sha256,
            "kb_version": self.kb_version,
            "detail": self.detail,
        }


class KbChangeLog:
    """The ``kb_changes`` table of a store (created by its migrations on first use)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def append(self, changes: Sequence[KbChange]) -> None:
        """Write the changes in one transaction."""
        now = dt.datetime.now(dt.UTC)
        with self.db.session() as session:
            for change in changes:
                session.add(
                    KbChangeRow(
                        id=change.id or uuid.uuid4().hex,
                        created_at=change.created_at or now,
                        actor=change.actor,
                        collection=change.collection,
                        entry_id=change.entry_id,
                        op=change.op,
                        before_sha256=change.before_sha256,
                        after_sha256=change.after_sha256,
                        kb_version=change.kb_version,
                        detail=change.detail,
                    )
                )

    def history(
        self, collection: str, *, entry_id: str | None = None, limit: int = 1000
    ) -> list[KbChange]:
        """The collection's changes (of one entry, when given), oldest first."""
        statement = select(KbChangeRow).where(KbChangeRow.collection == collection)
        if entry_id is not None:
            statement = statement.where(KbChangeRow.entry_id == entry_id)
        statement = statement.order_by(KbChangeRow.kb_version, KbChangeRow.created_at).limit(limit)
        with self.db.session() as session:
            return [
                KbChange(
                    actor=row.actor,
                    collection=row.collection,
                    entry_id=row.entry_id,
                    op=row.op,
                    before_sha256=row.before_sha256,
                    after_sha256=row.after_sha256,
                    kb_version=row.kb_version,
                    detail=dict(row.detail or {}),
                    id=row.id,
                    created_at=row.created_at,
                )
                for row in session.scalars(statement)
            ]


class AuditedWrites:
    """Upsert and Delete on ``kb``, each change recorded in ``changes`` under its actor."""

    def __init__(self, kb: KnowledgeBase, changes: KbChangeLog) -> None:
        self.kb = kb
        self.changes = changes
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, collection: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(collection, threading.Lock())

    def _versions(self, collection: str, ids: Sequence[str]) -> dict[str, str]:
        if collection not in self.kb.collection_names():
            return {}
        stored = self.kb.collection(collection).entries(list(ids))
        return {entry_id: entry_sha256(entry) for entry_id, entry in stored.items()}

    def upsert(
        self,
        actor: str,
        collection: str,
        entries: Sequence[KbEntry],
        *,
        create: bool = False,
        self_evidenced: bool | None = None,
        progress: bool = False,
        detail: dict[str, Any] | None = None,
        expected_before: dict[str, str] | None = None,
    ) -> UpsertResult:
        """``KnowledgeBase.upsert``, audited; ``detail`` goes into each entry's change
        record (e.g. the reviewed link a phrasing came from).

        ``expected_before``: entry id -> the version (sha256) the caller read and changed;
        when an entry is at another version by the time the write starts, nothing is
        written (FAILED_PRECONDITION): a read-modify-write never drops a concurrent change.
        """
        check_collection_name(collection)
        check_entries(entries, self.kb.settings)
        with self._lock(collection):
            before = self._versions(collection, [entry.id for entry in entries])
            for entry_id, expected in (expected_before or {}).items():
                if before.get(entry_id, "") != expected:
                    raise FailedPreconditionError(
                        f"entry {entry_id!r} of {collection!r} changed since it was read "
                        "(another write came first): read it again and redo the change",
                        field="entries",
                    )
            policy_before = (
                self.kb.collection(collection).self_evidenced
                if self_evidenced is not None and collection in self.kb.collection_names()
                else None
            )
            result = self.kb.upsert(
                collection,
                entries,
                create=create,
                self_evidenced=self_evidenced,
                progress=progress,
            )
            changes = [
                KbChange(
                    actor=actor,
                    collection=collection,
                    entry_id=entry.id,
                    op="upsert",
                    before_sha256=before.get(entry.id, ""),
                    after_sha256=entry_sha256(entry),
                    kb_version=result.kb_version,
                    detail=dict(detail or {}),
                )
                for entry in entries
            ]
            if self_evidenced is not None and policy_before is not self_evidenced:
                changes.append(
                    KbChange(
                        actor=actor,
                        collection=collection,
                        entry_id="",
                        op="policy",
                        kb_version=result.kb_version,
                        detail={"self_evidenced": self_evidenced, "before": policy_before},
                    )
                )
            self._record(changes)
        return result

    def delete(self, actor: str, collection: str, ids: Sequence[str]) -> DeleteResult:
        """``KnowledgeBase.delete``, audited (ids that were not there are not recorded)."""
        check_collection_name(collection)
        check_delete_ids(ids)
        with self._lock(collection):
            before = self._versions(collection, ids)
            result = self.kb.delete(collection, ids)
            missing = set(result.missing_ids)
            self._record(
                [
                    KbChange(
                        actor=actor,
                        collection=collection,
                        entry_id=entry_id,
                        op="delete",
                        before_sha256=before.get(entry_id, ""),
                        kb_version=result.kb_version,
                    )
                    for entry_id in dict.fromkeys(ids)
                    if entry_id not in missing
                ]
            )
        return result

    def reembed(self, actor: str, collection: str, model: str, *, progress: bool = False) -> int:
        """``KnowledgeBase.reembed``, audited: one ``model`` change naming both models."""
        check_collection_name(collection)
        with self._lock(collection):
            before = self.kb.embedder_of(collection)
            units = self.kb.reembed(collection, model, progress=progress)
            after = self.kb.embedder_of(collection)
            self._record(
                [
                    KbChange(
                        actor=actor,
                        collection=collection,
                        entry_id="",
                        op="model",
                        kb_version=self.kb.collection(collection).store.last_seq(),
                        detail={
                            "model": self.kb.models.reported(after),
                            "before": self.kb.models.reported(before),
                            "units": units,
                        },
                    )
                ]
            )
        return units

    def _record(self, changes: Sequence[KbChange]) -> None:
        if not changes:
            return
        try:
            self.changes.append(changes)
        except UnavailableError as exc:
            log.error(
                "KB changes applied but not audited",
                extra={"changes": [change.to_json() for change in changes], "error": str(exc)},
            )
            raise UnavailableError(
                "the change was applied, but its audit record could not be written (the server "
                "log has it): check the store at database_url before changing more"
            ) from exc
