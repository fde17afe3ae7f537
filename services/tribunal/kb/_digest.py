"""Content hashes of entries: what a stored verification and a served answer are bound to."""

from __future__ import annotations

import hashlib
import json

from ._entry import KbEntry
from ._ingest import entry_to_record

__all__ = ["answer_sha256", "entry_sha256", "sha256_hex"]


def sha256_hex(text: str) -> str:
    """sha256 (hex) of ``text``'s UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def answer_sha256(answer: str) -> str:
    """sha256 (hex) of an answer's UTF-8 text: what the gateway compares the served text with."""
    return sha256_hex(answer)


def entry_sha256(entry: KbEntry) -> str:
    """sha256 (hex) of an entry's canonical JSON: its version."""
    record = entry_to_record(entry)
    return sha256_hex(json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")))
