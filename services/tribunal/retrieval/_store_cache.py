"""Reads of a collection's SQLite store kept while the database is unchanged.

A search reads the same few things of its collection on every query: the change
sequence, the model and policy in ``meta``, the served entries with their verifications
and signatures. Parsing them again per query (JSON, hashes) cost more CPU than the
search itself, and held the store's lock meanwhile. They change only when the database
does, and SQLite says when that is: ``PRAGMA data_version`` moves when another connection
(another process: the CLI, a replica) commits, and the connection's ``total_changes``
moves with its own writes. Both are read inside the caller's read transaction, so a
cached value is the one the transaction would have read.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from typing import Any

__all__ = ["StoreReadCache"]


class StoreReadCache:
    """Values read from one connection, dropped whenever the database changed.

    Not thread-safe: the store calls it with its lock held, inside the read.

    Args:
        max_values: Most values kept; past it the cache starts over (a collection
            read in full by an export does not keep every entry in memory).
    """

    def __init__(self, max_values: int = 4096) -> None:
        self.max_values = max_values
        self._key: tuple[int, int] | None = None
        self._values: dict[Any, Any] = {}
        self.hits_ = 0
        """Reads answered from the cache."""
        self.misses_ = 0
        """Reads that went to the database."""

    def sync(self, db: sqlite3.Connection) -> None:
        """Drop every value if the database changed since the last call. Call it first
        in a read (it starts the read transaction when none is open)."""
        key = (int(db.execute("PRAGMA data_version").fetchone()[0]), db.total_changes)
        if key != self._key:
            self._key = key
            self._values.clear()

    def get(self, name: Any, read: Callable[[], Any]) -> Any:
        """The value of ``name`` as of the last :meth:`sync`; ``read`` on a miss."""
        try:
            value = self._values[name]
        except KeyError:
            self.misses_ += 1
            value = read()
            if len(self._values) >= self.max_values:
                self._values.clear()
            self._values[name] = value
            return value
        self.hits_ += 1
        return value
