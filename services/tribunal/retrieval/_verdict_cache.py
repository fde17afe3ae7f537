"""A SQLite cache of verification verdicts, shared by every collection under one root.

Keyed by :func:`~._verification.verification_key` (the answer's sha256, the chunks'
sha256s, the checker version): re-ingesting the same KB, or the same entry into
another collection, reuses the verdict instead of running the entailment models again.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from pathlib import Path

from ._verification import EntryVerification

__all__ = ["SqliteVerdictCache"]


class SqliteVerdictCache:
    """Verdicts in one SQLite file (WAL; safe across processes)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(
            path, isolation_level=None, check_same_thread=False, timeout=30.0
        )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, record TEXT NOT NULL)"
        )

    def get(self, key: str) -> EntryVerification | None:
        with self._lock:
            row = self._db.execute("SELECT record FROM verdicts WHERE key = ?", (key,)).fetchone()
        return EntryVerification.from_record(json.loads(row[0])) if row else None

    def put(self, key: str, verification: EntryVerification) -> None:
        record = json.dumps(verification.to_record(), ensure_ascii=False)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO verdicts (key, record) VALUES (?, ?)", (key, record)
            )

    def close(self) -> None:
        with self._lock:
            self._db.close()
