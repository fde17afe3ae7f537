"""Knowledge-base entries: the model every service shares, their files and their hashes.

Framework-free: nothing here imports grpc or ray. Retrieval stores and searches
entries; the ensemble judges them; the gateway checks a served answer against the
entry's hash.

Typical use::

    entries, repeated = deduplicate(read_entries(path, max_chars=1000))
    entry_sha256(entries[0])  # the entry's version

Files are JSONL in three record formats (:data:`RecordFormat`): ``faq``, ``corpus``
(BEIR) and the native ``entries`` form that :func:`entry_to_record` writes.
"""

from ._chunking import chunk_sentences, chunk_text
from ._digest import answer_sha256, entry_sha256, sha256_hex
from ._entry import (
    ANSWER_UNIT_ID,
    QUESTION_UNIT_ID,
    Chunk,
    KbEntry,
    chunks_cut_from_answer,
    phrasing_index,
    phrasing_key,
    phrasing_unit_id,
    self_sourced,
)
from ._ingest import deduplicate, entry_from_record, entry_to_record, read_entries
from ._wire import entry_from_proto, entry_to_proto

__all__ = [
    "ANSWER_UNIT_ID",
    "QUESTION_UNIT_ID",
    "Chunk",
    "KbEntry",
    "answer_sha256",
    "chunk_sentences",
    "chunk_text",
    "chunks_cut_from_answer",
    "deduplicate",
    "entry_from_proto",
    "entry_from_record",
    "entry_sha256",
    "entry_to_proto",
    "entry_to_record",
    "phrasing_index",
    "phrasing_key",
    "phrasing_unit_id",
    "read_entries",
    "self_sourced",
    "sha256_hex",
]
