"""A persistent cache of model answers, shared by processes and runs.

Decoding is greedy and scoring is one forward pass, so an answer is a function of
(backend, model, call, conversation, decoding bounds): evaluations, sweeps and bulk
labelling jobs that ask the same question again reuse the first answer instead of
recomputing it, across processes (sharded runs) and across runs.

A cached answer carries the :class:`Usage` of the run that computed it, so cost reports
(tokens and seconds per item) stay comparable whether or not the cache was warm; the
engine's own running total counts only work done now.

Storage is a single-table SQLite file through the stdlib ``sqlite3``: it is a key-value
store read and written by several processes at once (WAL mode), which needs neither an
ORM nor the audit database (SQLAlchemy is the store for records people query).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from ._types import Generation, Prompt, Usage

__all__ = ["ResponseCache", "cache_key"]

_SCHEMA = "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, value TEXT NOT NULL)"


def cache_key(
    backend: str,
    model: str,
    call: str,
    prompt: Prompt,
    *,
    max_new_tokens: int | None = None,
    grammar: Mapping[str, Any] | None = None,
) -> str:
    """sha256 over everything that determines the answer (not the template id: a
    template renamed without changing its text yields the same answer)."""
    material = json.dumps(
        [backend, model, call, prompt.as_dicts(), max_new_tokens, grammar],
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(material.encode()).hexdigest()


class ResponseCache:
    """Answers keyed by :func:`cache_key` in a SQLite file; thread- and process-safe."""

    def __init__(self, path: Path) -> None:
        self.path = path.expanduser()
        """The SQLite file (created with its folder on first use)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, timeout=60.0, check_same_thread=False)
        with self._lock, self._db:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(_SCHEMA)
        self.hits = 0
        """Answers served from the file by this process."""
        self.misses = 0
        """Answers this process had to compute."""

    def get_many(self, keys: Iterable[str]) -> dict[str, dict[str, Any]]:
        wanted = list(dict.fromkeys(keys))
        found: dict[str, dict[str, Any]] = {}
        with self._lock:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key, value FROM answers WHERE key IN ({marks})", chunk
                ).fetchall()
                found.update((key, json.loads(value)) for key, value in rows)
        return found

    def put_many(self, values: Mapping[str, Mapping[str, Any]]) -> None:
        if not values:
            return
        rows = [(key, json.dumps(value, ensure_ascii=False)) for key, value in values.items()]
        with self._lock, self._db:
            # OR IGNORE: two shards computing the same answer keep the first; equal anyway.
            self._db.executemany("INSERT OR IGNORE INTO answers (key, value) VALUES (?, ?)", rows)

    def count(self, hits: int, misses: int) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses

    def close(self) -> None:
        with self._lock:
            self._db.close()


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
        "completion_tokens": usage.completion_tokens,
        "seconds": usage.seconds,
        "calls": usage.calls,
    }


def usage_from_dict(data: Mapping[str, Any]) -> Usage:
    return Usage(
        prompt_tokens=int(data["prompt_tokens"]),
        cached_tokens=int(data["cached_tokens"]),
        completion_tokens=int(data["completion_tokens"]),
        seconds=float(data["seconds"]),
        calls=int(data["calls"]),
    )


def generation_to_dict(generation: Generation) -> dict[str, Any]:
    return {
        "text": generation.text,
        "finish_reason": generation.finish_reason,
        "usage": usage_to_dict(generation.usage),
    }


def generation_from_dict(data: Mapping[str, Any], prompt_id: str | None) -> Generation:
    return Generation(
        text=str(data["text"]),
        finish_reason=str(data["finish_reason"]),
        usage=usage_from_dict(data["usage"]),
        prompt_id=prompt_id,
    )
