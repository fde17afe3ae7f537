"""Vectors of texts an embedder has seen, kept on disk across processes and restarts.

The feature matcher embeds each KB entry's question and answer with every query that
retrieves it; an answer of a few hundred words costs a forward pass several times a
query's. Written once — at ingestion (:func:`tribunal.ensemble.precompute_entry_vectors`)
or at the entry's first match — they are read back from here by every later process on
the same data directory.

One SQLite file per model under ``<data_dir>/vectors/``, keyed by the sha256 of the
text. The stdlib ``sqlite3`` rather than the SQLAlchemy audit store: this is a local
cache of one table with one key, written from one process at a time per file, and
nothing is lost when it is deleted.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ._vectors import Vectors

__all__ = ["VectorStore"]


def _key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class VectorStore:
    """float32 vectors of one model by text; thread-safe.

    Args:
        path: The SQLite file (created with its folder).
        model: The embedder's name, recorded and checked: one file never mixes models.
        dimension: Vector length, checked on every read.
    """

    def __init__(self, path: Path, *, model: str, dimension: int) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.dimension = dimension
        self._lock = threading.Lock()
        # Readers in other processes while one writes: WAL, and wait rather than fail.
        self._db = sqlite3.connect(path, timeout=30.0, check_same_thread=False)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS vectors (text_sha256 TEXT PRIMARY KEY, vector BLOB)"
            )
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('model', ?)", (model,))
            (stored,) = self._db.execute("SELECT value FROM meta WHERE key='model'").fetchone()
        if stored != model:
            raise ValueError(f"{path} holds vectors of {stored}, not {model}")

    @classmethod
    def for_model(cls, data_dir: Path, *, model: str, dimension: int) -> VectorStore:
        """The store of ``model`` under ``data_dir/vectors``."""
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
        return cls(data_dir / "vectors" / f"{safe}.sqlite", model=model, dimension=dimension)

    def get(self, texts: Sequence[str]) -> dict[str, Vectors]:
        """The stored vectors of those of ``texts`` that have one."""
        keys = {_key(text): text for text in texts}
        found: dict[str, Vectors] = {}
        items = list(keys.items())
        with self._lock:
            for start in range(0, len(items), 500):  # SQLite's bound-parameter limit
                part = [key for key, _ in items[start : start + 500]]
                marks = ",".join("?" * len(part))
                rows = self._db.execute(
                    f"SELECT text_sha256, vector FROM vectors WHERE text_sha256 IN ({marks})",
                    part,
                ).fetchall()
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if vector.shape == (self.dimension,):  # a torn row is recomputed
                        found[keys[key]] = vector
        return found

    def put(self, texts: Sequence[str], vectors: Vectors) -> None:
        rows = [
            (_key(text), np.ascontiguousarray(vector, dtype=np.float32).tobytes())
            for text, vector in zip(texts, vectors, strict=True)
        ]
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)

    def __len__(self) -> int:
        with self._lock:
            (count,) = self._db.execute("SELECT COUNT(*) FROM vectors").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            self._db.close()
