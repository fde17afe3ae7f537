"""Who may vote on the review page: one key per annotator, stored as its sha256.

``tribunal review add-annotator NAME`` makes a key and prints it once; the annotator
signs in with it and every vote they cast is recorded under NAME, so one person
cannot vote under several names, and the store's unique (item, annotator) key then
holds them to one vote per item. ``remove-annotator`` revokes a key (the votes stay).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from sqlalchemy import select

from ..core import FailedPreconditionError, NotFoundError
from ..core.storage import Database
from ._review import validate_annotator
from ._review_tables import ReviewAnnotatorRow

__all__ = ["AnnotatorRegistry"]


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class AnnotatorRegistry:
    """The annotators of a store (the review page's sign-in)."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.create_schema()

    def add(self, name: str) -> str:
        """Register ``name``; returns their key (shown once, kept only as its sha256).

        Raises:
            FailedPreconditionError: ``name`` already has a valid key.
        """
        name = validate_annotator(name)
        key = secrets.token_urlsafe(24)
        now = dt.datetime.now(dt.UTC)
        with self.db.session() as session:
            row = session.get(ReviewAnnotatorRow, name)
            if row is not None and row.revoked_at is None:
                raise FailedPreconditionError(
                    f"annotator {name!r} already has a key; `tribunal review remove-annotator "
                    f"{name}` first to give them a new one",
                    field="name",
                )
            if row is None:
                session.add(ReviewAnnotatorRow(name=name, key_sha256=_digest(key), created_at=now))
            else:  # a revoked annotator comes back with a new key, under the same name
                row.key_sha256, row.created_at, row.revoked_at = _digest(key), now, None
        return key

    def remove(self, name: str) -> None:
        """Revoke ``name``'s key.

        Raises:
            NotFoundError: no such annotator with a valid key.
        """
        with self.db.session() as session:
            row = session.get(ReviewAnnotatorRow, validate_annotator(name))
            if row is None or row.revoked_at is not None:
                raise NotFoundError(f"no annotator {name!r} with a valid key", field="name")
            row.revoked_at = dt.datetime.now(dt.UTC)

    def annotator(self, key: str) -> str | None:
        """The name a key signs in as, or None (unknown or revoked)."""
        if not key or len(key) > 256:
            return None
        statement = select(ReviewAnnotatorRow.name).where(
            ReviewAnnotatorRow.key_sha256 == _digest(key),
            ReviewAnnotatorRow.revoked_at.is_(None),
        )
        with self.db.session() as session:
            return session.scalars(statement).first()

    def names(self) -> list[dict[str, object]]:
        """Every annotator, with when they were added and whether the key is revoked."""
        with self.db.session() as session:
            rows = session.scalars(select(ReviewAnnotatorRow).order_by(ReviewAnnotatorRow.name))
            return [
                {
                    "annotator": row.name,
                    "added": row.created_at.isoformat(timespec="seconds"),
                    "revoked": row.revoked_at is not None,
                }
                for row in rows
            ]
