"""The durable record of a collection: entries, unit embeddings, a change log.

One SQLite file per collection in WAL mode with ``synchronous=FULL``: a
write is acknowledged only after its transaction is fsync'd, so a crash or
restart loses nothing acknowledged. Every write appends to ``changes`` (one
row per touched entry, with a growing sequence number); in-memory indexes
remember the last sequence they applied and replay the rest, which also
lets several processes serve the same directory. Embeddings are stored with
their units, so indexes rebuild without re-embedding; ``meta`` names the model they
come from, and re-embedding with another model swaps every vector and that name in
one transaction (a process still holding the old model is refused its next write). Each entry's
verification (do its chunks entail its answer?) is written in the same
transaction as the entry version it belongs to; the collection's
``self_evidenced`` policy lives in ``meta``. The writer's signatures of the served
records (:mod:`._signing`) are kept per entry, dropped in the same transaction that
rewrites, re-verifies or deletes the entry; the newest signed collection head is in
``meta``.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ..core import FailedPreconditionError
from ..kb import QUESTION_UNIT_ID, KbEntry, entry_from_record, entry_to_record, phrasing_index
from ._signing import SignedRecord
from ._store_cache import StoreReadCache
from ._store_files import (
    content_version_of,
    meta_value,
    record_sha256,
    served_entry_of,
    signed_record_of,
)
from ._verification import EntryVerification

__all__ = ["EntryStore", "RetrievalModelChangedError", "StoredUnits"]


class RetrievalModelChangedError(FailedPreconditionError):
    """The store was re-embedded with another model by another process after this one
    opened it; reopening the collection with its new model resolves it."""


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS entries (id TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS units (
    entry_id TEXT NOT NULL,
    position INTEGER NOT NULL,
    unit_id TEXT NOT NULL,
    text TEXT NOT NULL,
    embedding BLOB NOT NULL,
    PRIMARY KEY (entry_id, position)
);
CREATE TABLE IF NOT EXISTS verifications (entry_id TEXT PRIMARY KEY, record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS signatures (entry_id TEXT PRIMARY KEY, signed TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    entry_id TEXT NOT NULL,
    op TEXT NOT NULL CHECK (op IN ('upsert', 'delete'))
);
"""


@dataclass(frozen=True)
class StoredUnits:
    """An entry's search units as stored: ids, texts, embeddings (one row each)."""

    entry_id: str
    unit_ids: list[str]
    texts: list[str]
    vectors: NDArray[np.float32]


class EntryStore:
    """SQLite-backed entries + embeddings + change log of one collection.

    Args:
        path: The database file (created with its schema when missing).
        dimension: Embedding length, checked against the stored one.
        embedder: Embedder id, checked against the stored one (mixing models
            in one index would make scores meaningless).
    """

    def __init__(self, path: Path, *, dimension: int, embedder: str) -> None:
        self.path = path
        self.dimension = dimension
        self.embedder = embedder
        self._lock = threading.Lock()
        self._cache = StoreReadCache()
        self._db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        with self._transaction():
            stored = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
            if not stored:
                self._db.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [
                        ("dimension", str(dimension)),
                        ("embedder", embedder),
                        ("pruned_through", "0"),
                    ],
                )
            elif stored["dimension"] != str(dimension) or stored["embedder"] != embedder:
                raise ValueError(
                    f"{path} was built with embedder {stored['embedder']!r} "
                    f"(dimension {stored['dimension']}), not {embedder!r} ({dimension}); "
                    "re-embed it: `tribunal kb reembed --collection NAME --model profile|tuned`"
                )

    def model(self) -> str:
        """The embedder the stored vectors come from now (another process may have
        re-embedded the collection since this store was opened)."""
        return str(self._meta("embedder"))

    def _check_model(self, db: sqlite3.Connection) -> None:
        stored = db.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()[0]
        if stored != self.embedder:
            # Vectors of two models in one index would make its scores meaningless.
            raise RetrievalModelChangedError(
                f"{self.path} was re-embedded with {stored!r} after this process opened it "
                f"with {self.embedder!r}; retry (the collection reopens with its new model)"
            )

    def reembed(
        self, embedder: str, dimension: int, embed: Callable[[list[str]], NDArray[np.float32]]
    ) -> int:
        """Replace every unit's vector by ``embed``'s (one call per batch of new texts,
        outside any lock) and bind the store to ``embedder``, in one transaction.
        Writes that land meanwhile get their units embedded on the next pass. Returns the
        units re-embedded.

        Raises:
            FailedPreconditionError: the collection kept changing for three passes.
        """
        vectors: dict[str, NDArray[np.float32]] = {}
        for _ in range(3):
            with self._transaction("DEFERRED") as db:
                seq = self._last_seq(db)
                texts = [r[0] for r in db.execute("SELECT DISTINCT text FROM units")]
            missing = [text for text in texts if text not in vectors]
            if missing:
                vectors.update(zip(missing, embed(missing), strict=True))
            with self._transaction() as db:
                if self._last_seq(db) != seq:
                    continue  # written meanwhile: embed what is new, then try again
                rows = db.execute("SELECT entry_id, position, text FROM units").fetchall()
                db.executemany(
                    "UPDATE units SET embedding = ? WHERE entry_id = ? AND position = ?",
                    [
                        (np.asarray(vectors[text], np.float32).tobytes(), entry_id, position)
                        for entry_id, position, text in rows
                    ],
                )
                db.executemany(
                    "UPDATE meta SET value = ? WHERE key = ?",
                    [(embedder, "embedder"), (str(dimension), "dimension")],
                )
                self.embedder, self.dimension = embedder, dimension
                return len(rows)
        raise FailedPreconditionError(
            f"{self.path} changed during three re-embedding passes; rerun when writes pause"
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    class _Tx:
        def __init__(self, store: EntryStore, mode: str) -> None:
            self.store, self.mode = store, mode

        def __enter__(self) -> sqlite3.Connection:
            self.store._lock.acquire()
            try:
                self.store._db.execute(f"BEGIN {self.mode}")
            except BaseException:
                self.store._lock.release()
                raise
            return self.store._db

        def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
            try:
                self.store._db.execute("COMMIT" if exc is None else "ROLLBACK")
            finally:
                self.store._lock.release()

    def _transaction(self, mode: str = "IMMEDIATE") -> EntryStore._Tx:
        """A locked transaction: IMMEDIATE for writes, DEFERRED for consistent reads."""
        return EntryStore._Tx(self, mode)

    # -- writes -----------------------------------------------------------------
    def write(
        self,
        upserts: Sequence[tuple[KbEntry, Sequence[str], Sequence[str], NDArray[np.float32]]],
        deletes: Sequence[str] = (),
        verifications: Mapping[str, EntryVerification] | None = None,
    ) -> tuple[int, list[str]]:
        """Apply upserts (entry, unit ids, unit texts, vectors) with their verifications
        (by entry id; an upsert without one has none stored) and deletes in one durable
        transaction. Returns the last change sequence and the delete ids that did not
        exist."""
        missing: list[str] = []
        verifications = verifications or {}
        with self._transaction() as db:
            self._check_model(db)
            for entry, unit_ids, texts, vectors in upserts:
                db.execute("DELETE FROM verifications WHERE entry_id = ?", (entry.id,))
                db.execute("DELETE FROM signatures WHERE entry_id = ?", (entry.id,))
                if entry.id in verifications:
                    db.execute(
                        "INSERT INTO verifications (entry_id, record) VALUES (?, ?)",
                        (entry.id, _verification_json(verifications[entry.id])),
                    )
                db.execute("DELETE FROM units WHERE entry_id = ?", (entry.id,))
                db.execute(
                    "INSERT OR REPLACE INTO entries (id, record) VALUES (?, ?)",
                    (entry.id, json.dumps(entry_to_record(entry), ensure_ascii=False)),
                )
                db.executemany(
                    "INSERT INTO units (entry_id, position, unit_id, text, embedding) "
                    "VALUES (?, ?, ?, ?, ?)",
                    [
                        (entry.id, i, unit_id, text, np.asarray(vector, np.float32).tobytes())
                        for i, (unit_id, text, vector) in enumerate(
                            zip(unit_ids, texts, vectors, strict=True)
                        )
                    ],
                )
                db.execute("INSERT INTO changes (entry_id, op) VALUES (?, 'upsert')", (entry.id,))
            for entry_id in deletes:
                if db.execute("DELETE FROM entries WHERE id = ?", (entry_id,)).rowcount == 0:
                    missing.append(entry_id)
                    continue
                db.execute("DELETE FROM units WHERE entry_id = ?", (entry_id,))
                db.execute("DELETE FROM verifications WHERE entry_id = ?", (entry_id,))
                db.execute("DELETE FROM signatures WHERE entry_id = ?", (entry_id,))
                db.execute("INSERT INTO changes (entry_id, op) VALUES (?, 'delete')", (entry_id,))
            last = self._last_seq(db)
        return last, missing

    def set_verifications(self, verifications: Mapping[str, EntryVerification]) -> int:
        """Replace stored verifications (``tribunal kb verify``), each only while its entry
        is still the version it checked; returns how many were written."""
        written = 0
        with self._transaction() as db:
            for entry_id, verification in verifications.items():
                row = db.execute("SELECT record FROM entries WHERE id = ?", (entry_id,)).fetchone()
                if row is None or record_sha256(row[0]) != verification.entry_sha256:
                    continue  # deleted or rewritten since: its own upsert verified it
                db.execute(
                    "INSERT OR REPLACE INTO verifications (entry_id, record) VALUES (?, ?)",
                    (entry_id, _verification_json(verification)),
                )
                db.execute("DELETE FROM signatures WHERE entry_id = ?", (entry_id,))
                written += 1
        return written

    def set_signatures(
        self,
        entries: Mapping[str, tuple[str, SignedRecord]],
        head: tuple[int, SignedRecord] | None = None,
    ) -> int:
        """Store signed served records (entry id -> (the entry sha256 it signs, record)),
        each only while the entry is still that version, and a signed head for
        collection version ``head[0]`` (only when no newer head is stored). Returns
        how many entry records were stored."""
        stored = 0
        with self._transaction() as db:
            for entry_id, (sha, signed) in entries.items():
                row = db.execute("SELECT record FROM entries WHERE id = ?", (entry_id,)).fetchone()
                if row is None or record_sha256(row[0]) != sha:
                    continue  # rewritten or deleted since: its own writer signs it
                db.execute(
                    "INSERT OR REPLACE INTO signatures (entry_id, signed) VALUES (?, ?)",
                    (entry_id, signed.to_json()),
                )
                stored += 1
            if head is not None:
                current = db.execute(
                    "SELECT value FROM meta WHERE key = 'signed_head_version'"
                ).fetchone()
                if current is None or int(current[0]) <= head[0]:
                    db.executemany(
                        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                        [
                            ("signed_head_version", str(head[0])),
                            ("signed_head", head[1].to_json()),
                        ],
                    )
        return stored

    def signed_head(self) -> SignedRecord | None:
        """The newest signed collection head (None: never signed)."""
        with self._lock:
            self._cache.sync(self._db)
            return self._signed_head_locked(self._db)

    def _signed_head_locked(self, db: sqlite3.Connection) -> SignedRecord | None:
        def read() -> SignedRecord | None:
            row = db.execute("SELECT value FROM meta WHERE key = 'signed_head'").fetchone()
            return SignedRecord.from_json(row[0]) if row else None

        return self._cache.get("signed_head", read)  # type: ignore[no-any-return]

    def _meta(self, key: str) -> str | None:
        """One ``meta`` value (None: not set), read once per database state."""
        with self._lock:
            self._cache.sync(self._db)
            return self._cache.get(  # type: ignore[no-any-return]
                ("meta", key), lambda: meta_value(self._db, key)
            )

    def signatures(self, entry_ids: Sequence[str]) -> dict[str, SignedRecord]:
        """Stored signed records of these entries (unsigned ones are left out)."""
        out: dict[str, SignedRecord] = {}
        with self._transaction("DEFERRED") as db:
            for entry_id in entry_ids:
                row = db.execute(
                    "SELECT signed FROM signatures WHERE entry_id = ?", (entry_id,)
                ).fetchone()
                if row is not None:
                    out[entry_id] = SignedRecord.from_json(row[0])
        return out

    def set_self_evidenced(self, value: bool) -> None:
        """The collection's ``self_evidenced`` policy."""
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('self_evidenced', ?)",
                ("true" if value else "false",),
            )

    def self_evidenced(self) -> bool:
        return self._meta("self_evidenced") == "true"

    def prune_changes(self, through: int) -> None:
        """Forget change rows up to ``through`` (a snapshot covers them)."""
        with self._transaction() as db:
            db.execute("DELETE FROM changes WHERE seq <= ?", (through,))
            db.execute("UPDATE meta SET value = ? WHERE key = 'pruned_through'", (str(through),))

    # -- reads ------------------------------------------------------------------
    @staticmethod
    def _last_seq(db: sqlite3.Connection) -> int:
        row = db.execute("SELECT seq FROM sqlite_sequence WHERE name = 'changes'").fetchone()
        return int(row[0]) if row else 0

    def last_seq(self) -> int:
        """Sequence number of the newest change (0 when none)."""
        with self._lock:
            self._cache.sync(self._db)
            return self._cached_last_seq(self._db)

    def _cached_last_seq(self, db: sqlite3.Connection) -> int:
        return self._cache.get("last_seq", lambda: self._last_seq(db))  # type: ignore[no-any-return]

    def pruned_through(self) -> int:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = 'pruned_through'").fetchone()
        return int(row[0])

    def changes_since(self, seq: int) -> tuple[int, dict[str, str]]:
        """The newest sequence and, per entry changed after ``seq``, its last op."""
        with self._transaction("DEFERRED") as db:
            rows = db.execute(
                "SELECT seq, entry_id, op FROM changes WHERE seq > ? ORDER BY seq", (seq,)
            ).fetchall()
            last = self._last_seq(db)
        return last, {entry_id: op for _, entry_id, op in rows}

    def _units_of(self, db: sqlite3.Connection, entry_id: str) -> StoredUnits:
        rows = db.execute(
            "SELECT unit_id, text, embedding FROM units WHERE entry_id = ? ORDER BY position",
            (entry_id,),
        ).fetchall()
        vectors = np.frombuffer(b"".join(r[2] for r in rows), dtype=np.float32)
        return StoredUnits(
            entry_id,
            [r[0] for r in rows],
            [r[1] for r in rows],
            vectors.reshape(len(rows), self.dimension),
        )

    def units(self, entry_ids: Sequence[str]) -> list[StoredUnits]:
        """Stored units of these entries (entries no longer stored are left out)."""
        with self._transaction("DEFERRED") as db:
            return [
                self._units_of(db, entry_id)
                for entry_id in entry_ids
                if db.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone()
            ]

    def added_phrasings(self) -> tuple[int, list[tuple[str, str, str]]]:
        """The last change seq and every phrasing unit beyond each entry's question, as
        ``(entry id, unit id, text)``: the units a taught query can be."""
        with self._transaction("DEFERRED") as db:
            rows = db.execute(
                "SELECT entry_id, unit_id, text FROM units WHERE unit_id LIKE ? "
                "ORDER BY entry_id, position",
                (f"{QUESTION_UNIT_ID}:%",),
            ).fetchall()
            last = self._last_seq(db)
        return last, [(str(r[0]), str(r[1]), str(r[2])) for r in rows if phrasing_index(str(r[1]))]

    def all_units(self) -> tuple[int, list[str], list[str], list[str], NDArray[np.float32]]:
        """Everything, consistently: (last seq, entry ids, unit ids, texts, vectors) per unit."""
        with self._transaction("DEFERRED") as db:
            rows = db.execute(
                "SELECT entry_id, unit_id, text, embedding FROM units ORDER BY entry_id, position"
            ).fetchall()
            last = self._last_seq(db)
        vectors = np.frombuffer(b"".join(r[3] for r in rows), dtype=np.float32)
        return (
            last,
            [r[0] for r in rows],
            [r[1] for r in rows],
            [r[2] for r in rows],
            vectors.reshape(len(rows), self.dimension).copy(),
        )

    def entries(self, entry_ids: Sequence[str]) -> dict[str, KbEntry]:
        """Stored entries by id (absent ids are left out)."""
        if not entry_ids:
            return {}
        with self._transaction("DEFERRED") as db:
            out: dict[str, KbEntry] = {}
            for entry_id in entry_ids:
                row = db.execute("SELECT record FROM entries WHERE id = ?", (entry_id,)).fetchone()
                if row is not None:
                    out[entry_id] = entry_from_record(
                        json.loads(row[0]), record_format="entries", max_chars=1
                    )
        return out

    def verified_entries(
        self, entry_ids: Sequence[str]
    ) -> tuple[int, dict[str, tuple[KbEntry, EntryVerification | None]]]:
        """The last change sequence and, per stored id, the entry with its verification
        (None when none is stored, or it belongs to another version of the entry)."""
        with self._transaction("DEFERRED") as db:
            self._cache.sync(db)
            return self._cached_last_seq(db), self._verified_locked(db, entry_ids)

    def served_entries(
        self, entry_ids: Sequence[str]
    ) -> tuple[
        int,
        dict[str, tuple[KbEntry, EntryVerification | None]],
        dict[str, SignedRecord],
        SignedRecord | None,
    ]:
        """As :meth:`verified_entries`, with the entries' signed records and the newest
        signed head, all read in one transaction (a search never mixes two versions)."""
        with self._transaction("DEFERRED") as db:
            self._cache.sync(db)
            found = self._verified_locked(db, entry_ids)
            signed: dict[str, SignedRecord] = {}
            for entry_id in found:
                read = partial(signed_record_of, db, entry_id)
                record = self._cache.get(("signed", entry_id), read)
                if record is not None:
                    signed[entry_id] = record
            return self._cached_last_seq(db), found, signed, self._signed_head_locked(db)

    def _verified_locked(
        self, db: sqlite3.Connection, entry_ids: Sequence[str]
    ) -> dict[str, tuple[KbEntry, EntryVerification | None]]:
        """Each stored entry with its verification; the caller synced the cache."""
        out: dict[str, tuple[KbEntry, EntryVerification | None]] = {}
        for entry_id in entry_ids:
            found = self._cache.get(("verified", entry_id), partial(served_entry_of, db, entry_id))
            if found is not None:
                out[entry_id] = found
        return out

    def iter_verified_entries(self) -> Iterator[tuple[KbEntry, EntryVerification | None]]:
        """Every stored entry with its verification (``tribunal kb verify``)."""
        with self._transaction("DEFERRED") as db:
            ids = [row[0] for row in db.execute("SELECT id FROM entries ORDER BY id")]
        for start in range(0, len(ids), 500):
            _, found = self.verified_entries(ids[start : start + 500])
            yield from found.values()

    def existing(self, entry_ids: Sequence[str]) -> set[str]:
        """Which of these ids are stored."""
        with self._transaction("DEFERRED") as db:
            return {
                entry_id
                for entry_id in entry_ids
                if db.execute("SELECT 1 FROM entries WHERE id = ?", (entry_id,)).fetchone()
            }

    def content_version(self) -> tuple[int, str]:
        """The last change sequence and the content hash of every stored entry:
        ``kb-`` + 16 hex of the sha256 over the entries' ids and versions (sorted by id),
        so the same entries give the same value in any store."""
        with self._transaction("DEFERRED") as db:
            version = content_version_of(db)
            last = self._last_seq(db)
        return last, version

    def iter_entries(self) -> Iterator[KbEntry]:
        """Every stored entry (for export)."""
        with self._transaction("DEFERRED") as db:
            rows = db.execute("SELECT record FROM entries ORDER BY id").fetchall()
        for (record,) in rows:
            yield entry_from_record(json.loads(record), record_format="entries", max_chars=1)


def _verification_json(verification: EntryVerification) -> str:
    return json.dumps(verification.to_record(), ensure_ascii=False)
