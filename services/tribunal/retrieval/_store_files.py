"""Reading a collection's store file without opening the collection: read-only, no
embedder, no index (the review page, a calibration's binding, choosing the model a
collection is searched with)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from pathlib import Path

from ..kb import KbEntry, entry_from_record, entry_sha256
from ._signing import SignedRecord
from ._verification import EntryVerification

__all__ = [
    "content_version_of",
    "meta_value",
    "read_content_version",
    "record_sha256",
    "served_entry_of",
    "signed_record_of",
    "stored_model",
    "stored_questions",
]


def _read_only(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=timeout)


def record_sha256(record_json: str) -> str:
    """The entry version of a stored record (as :func:`entry_sha256` computes it)."""
    return entry_sha256(
        entry_from_record(json.loads(record_json), record_format="entries", max_chars=1)
    )


def content_version_of(db: sqlite3.Connection) -> str:
    """``kb-`` + 16 hex of the sha256 over the entries' ids and record hashes, by id."""
    digest = hashlib.sha256()
    for entry_id, record in db.execute("SELECT id, record FROM entries ORDER BY id"):
        digest.update(f"{entry_id}\x00{record_sha256(record)}\n".encode())
    return f"kb-{digest.hexdigest()[:16]}"


def read_content_version(path: Path) -> str:
    """The content version of the store at ``path`` (what a calibration is bound to).

    Raises:
        FileNotFoundError: there is no store at ``path``.
    """
    if not path.is_file():
        raise FileNotFoundError(path)
    db = _read_only(path)
    try:
        return content_version_of(db)
    finally:
        db.close()


def stored_model(path: Path) -> str | None:
    """The model the vectors of the store at ``path`` come from; None when there is no
    store (or its schema is not written yet)."""
    if not path.is_file():
        return None
    db = _read_only(path)
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
    except sqlite3.OperationalError:  # created, schema not yet written
        return None
    finally:
        db.close()
    return None if row is None else str(row[0])


def stored_questions(path: Path, entry_ids: Sequence[str]) -> dict[str, str]:
    """The question of each of ``entry_ids`` stored in the collection file ``path`` (the
    review page shows them); absent ids and a missing file give nothing."""
    if not path.is_file() or not entry_ids:
        return {}
    db = _read_only(path, timeout=5.0)
    try:
        out: dict[str, str] = {}
        for entry_id in dict.fromkeys(entry_ids):
            row = db.execute("SELECT record FROM entries WHERE id = ?", (entry_id,)).fetchone()
            if row is not None:
                out[entry_id] = str(json.loads(row[0]).get("question", ""))
        return out
    finally:
        db.close()


def meta_value(db: sqlite3.Connection, key: str) -> str | None:
    """One ``meta`` value (None: not set)."""
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return str(row[0]) if row else None


def signed_record_of(db: sqlite3.Connection, entry_id: str) -> SignedRecord | None:
    """The entry's stored signed record (None: unsigned)."""
    row = db.execute("SELECT signed FROM signatures WHERE entry_id = ?", (entry_id,)).fetchone()
    return SignedRecord.from_json(row[0]) if row else None


def served_entry_of(
    db: sqlite3.Connection, entry_id: str
) -> tuple[KbEntry, EntryVerification | None] | None:
    """The stored entry with its verification (None when it belongs to another version
    of the entry); None when the entry is not stored."""
    row = db.execute("SELECT record FROM entries WHERE id = ?", (entry_id,)).fetchone()
    if row is None:
        return None
    checked = db.execute(
        "SELECT record FROM verifications WHERE entry_id = ?", (entry_id,)
    ).fetchone()
    verification = EntryVerification.from_record(json.loads(checked[0])) if checked else None
    if verification is not None and verification.entry_sha256 != record_sha256(row[0]):
        verification = None
    entry = entry_from_record(json.loads(row[0]), record_format="entries", max_chars=1)
    return entry, verification
