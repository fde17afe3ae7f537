"""A collection's store answers repeated reads from memory while the database is
unchanged, and reads again as soon as anything changed it: its own writes, or another
connection's (another process: the CLI, a replica) — never a value older than the
last commit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from tribunal.kb import KbEntry, entry_to_record
from tribunal.retrieval import KbSigner
from tribunal.retrieval._store import EntryStore
from tribunal.retrieval._store_files import record_sha256
from tribunal.retrieval._verification import EntryVerification, VerificationVerdict

MODEL = "test-model"


def _open(path: Path) -> EntryStore:
    return EntryStore(path, dimension=2, embedder=MODEL)


def _upsert(store: EntryStore, entry: KbEntry, verdict: VerificationVerdict | None) -> None:
    sha = record_sha256(json.dumps(entry_to_record(entry), ensure_ascii=False))
    verifications = (
        {entry.id: EntryVerification(verdict, entry_sha256=sha)} if verdict is not None else {}
    )
    store.write(
        [(entry, ["q"], [entry.question], np.ones((1, 2), np.float32))],
        verifications=verifications,
    )


def test_repeated_reads_come_from_memory_until_a_write(tmp_path: Path) -> None:
    store = _open(tmp_path / "entries.sqlite3")
    masks = KbEntry("masks", "Do masks help?", "Yes.")
    _upsert(store, masks, VerificationVerdict.VERIFIED)
    first = store.served_entries(["masks", "missing"])
    misses = store._cache.misses_
    again = store.served_entries(["masks", "missing"])
    assert again == first
    assert store._cache.misses_ == misses  # nothing read from the database again
    assert store._cache.hits_ > 0
    assert first[1]["masks"][1] is not None
    assert first[1]["masks"][1].verdict is VerificationVerdict.VERIFIED  # type: ignore[union-attr]

    _upsert(store, KbEntry("masks", "Do masks help?", "Partly."), None)  # its own write
    version, found, _, _ = store.served_entries(["masks"])
    assert version == first[0] + 1
    assert found["masks"][0].answer == "Partly."
    assert found["masks"][1] is None  # the old version's verification does not carry over


def test_another_connections_commits_are_read_at_once(tmp_path: Path) -> None:
    path = tmp_path / "entries.sqlite3"
    serving, writer = _open(path), _open(path)  # two processes on one collection
    _upsert(writer, KbEntry("masks", "Do masks help?", "Yes."), VerificationVerdict.VERIFIED)
    assert serving.last_seq() == 1
    assert not serving.self_evidenced()
    assert serving.model() == MODEL
    assert serving.signed_head() is None
    before = serving.served_entries(["masks"])
    assert before[2] == {}

    # Each kind of change another process makes is seen by the next read.
    writer.set_self_evidenced(True)
    assert serving.self_evidenced()
    signer = KbSigner.generate()
    record = json.dumps(entry_to_record(before[1]["masks"][0]), ensure_ascii=False)
    signed = signer.sign(b'{"kind":"entry"}')
    assert writer.set_signatures({"masks": (record_sha256(record), signed)}, (1, signed)) == 1
    after = serving.served_entries(["masks"])
    assert after[2] == {"masks": signed}
    assert after[3] == signed
    assert serving.signed_head() == signed
    _upsert(writer, KbEntry("hands", "Should I wash my hands?", "Often."), None)
    assert serving.last_seq() == 2
    assert set(serving.served_entries(["masks", "hands"])[1]) == {"masks", "hands"}
    writer.write([], deletes=["masks"])
    assert serving.served_entries(["masks"])[1] == {}
    writer.reembed("other-model", 2, lambda texts: np.ones((len(texts), 2), np.float32))
    assert serving.model() == "other-model"


def test_the_cache_starts_over_past_its_size(tmp_path: Path) -> None:
    store = _open(tmp_path / "entries.sqlite3")
    store._cache.max_values = 3
    for number in range(5):
        _upsert(store, KbEntry(f"e{number}", f"Question {number}?", "Answer."), None)
    ids = [f"e{number}" for number in range(5)]
    found = store.served_entries(ids)[1]
    assert list(found) == ids
    assert len(store._cache._values) <= 3
