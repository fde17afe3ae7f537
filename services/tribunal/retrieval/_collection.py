"""One collection: its durable store, dense and sparse indexes, and snapshots.

Directory layout (``<data_dir>/retrieval/<name>/``)::

    entries.sqlite3   the truth: entries, unit embeddings, change log (fsync'd)
    snapshot/         derived: FAISS index + row map, BM25 tokens, manifest.json

Writes go to the store first; an acknowledged write is on disk. The
in-memory indexes then replay the change log from the sequence they last
applied, and so does every search that finds the log ahead of them (another
process wrote). A snapshot lets a restart skip the rebuild; without a usable
one the indexes rebuild from the stored embeddings, never re-embedding (only
:meth:`Collection.reembed` does, when the collection's retrieval model changes).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from ..core import FailedPreconditionError, RetrievalSettings
from ..embedding import Embedder
from ..kb import KbEntry, phrasing_key
from ._dense import DenseIndex
from ._ranked import RankedUnits
from ._signing import (
    ENTRY_KIND,
    HEAD_KIND,
    SignedRecord,
    canonical_record,
    entry_record,
    head_record,
    parse_record,
)
from ._sparse import SparseIndex
from ._store import EntryStore
from ._types import CollectionStats, DeleteResult, UpsertResult
from ._verification import EntryVerification, VerificationVerdict

__all__ = ["Collection"]

log = logging.getLogger(__name__)

_SNAPSHOT = "snapshot"
_MANIFEST = "manifest.json"


class _ReadWriteLock:
    """Many concurrent searches, or one writer; waiting writers go first."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    @contextlib.contextmanager
    def read(self) -> Iterator[None]:
        with self._cond:
            while self._writing or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def write(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writing or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


class Collection:
    """A searchable, durable set of KB entries in one directory.

    Args:
        name: Collection name (for stats and messages).
        directory: Its folder; created when missing.
        embedder: Embeds unit texts on upsert.
        settings: Index and snapshot knobs.
    """

    def __init__(
        self, name: str, directory: Path, embedder: Embedder, settings: RetrievalSettings
    ) -> None:
        self.name = name
        self.directory = directory
        self.embedder = embedder
        self.settings = settings
        directory.mkdir(parents=True, exist_ok=True)
        try:
            self.store = EntryStore(
                directory / "entries.sqlite3", dimension=embedder.dimension, embedder=embedder.name
            )
        except ValueError as exc:
            raise FailedPreconditionError(f"collection {name!r}: {exc}") from exc
        self._lock = _ReadWriteLock()
        self.dense = DenseIndex(embedder.dimension, settings)
        self.sparse = SparseIndex(settings)
        self._applied_seq = 0
        self._content_version: tuple[int, str] | None = None
        self._snapshot_seq = 0
        # Added phrasings by their words, as of a change seq (read only when a search
        # leaves a query's own phrasing out: calibration on taught queries).
        self._added_phrasings: tuple[int, dict[str, frozenset[tuple[str, str]]]] | None = None
        with self._lock.write():
            self._load_locked()

    # -- loading and catching up ---------------------------------------------------
    def _load_locked(self) -> None:
        snapshot = self.directory / _SNAPSHOT
        try:
            manifest = json.loads((snapshot / _MANIFEST).read_text())
            seq = int(manifest["seq"])
            if seq < self.store.pruned_through() or seq > self.store.last_seq():
                raise ValueError(f"snapshot at change {seq} does not fit the store's log")
            if manifest["embedder"] != self.embedder.name:
                raise ValueError(f"snapshot was built with {manifest['embedder']}")
            self.dense = DenseIndex.load(snapshot, self.settings)
            self.sparse = SparseIndex.load(snapshot, self.settings)
            self._applied_seq = self._snapshot_seq = seq
        except (OSError, ValueError, KeyError) as exc:
            # Snapshots are derived data: any problem means rebuild from the store.
            if snapshot.exists():
                log.warning("ignoring snapshot", extra={"collection": self.name, "error": str(exc)})
            self._rebuild_locked()
        self._catch_up_locked()

    def _rebuild_locked(self) -> None:
        seq, entry_ids, unit_ids, texts, vectors = self.store.all_units()
        self.dense = DenseIndex(self.embedder.dimension, self.settings)
        self.dense.build(entry_ids, unit_ids, vectors)
        self.sparse = SparseIndex(self.settings)
        self.sparse.build(entry_ids, unit_ids, texts)
        self._applied_seq = seq

    def _catch_up_locked(self) -> None:
        """Apply logged changes newer than the indexes (own writes and other processes')."""
        if self._applied_seq < self.store.pruned_through():
            self._rebuild_locked()  # the log no longer reaches back far enough
            return
        last, changes = self.store.changes_since(self._applied_seq)
        if changes:
            for entry_id in changes:
                self.dense.remove(entry_id)
                self.sparse.remove(entry_id)
            upserted = [entry_id for entry_id, op in changes.items() if op == "upsert"]
            # Entries rewritten or deleted after `last` come back in their newest
            # state or not at all; the next catch-up replays them again (idempotent).
            for units in self.store.units(upserted):
                self.dense.add(units.entry_id, units.unit_ids, units.vectors)
                self.sparse.add(units.entry_id, units.unit_ids, units.texts)
        self._applied_seq = max(self._applied_seq, last)
        if self.dense.needs_rebuild():
            self._rebuild_locked()
        if self._applied_seq - self._snapshot_seq >= self.settings.snapshot_every_changes:
            self._snapshot_locked()

    def catch_up(self) -> None:
        """Replay newer changes and rebuild a stale BM25 matrix (every read does it first;
        a caller may do it ahead, outside a section that should stay short)."""
        if self.store.last_seq() == self._applied_seq and not self.sparse.stale:
            return
        with self._lock.write():
            self._catch_up_locked()
            if self.sparse.stale:
                self.sparse.refresh()

    # -- writes --------------------------------------------------------------------
    def upsert(
        self,
        entries: Sequence[KbEntry],
        *,
        verifications: Sequence[EntryVerification] = (),
        progress: bool = False,
    ) -> UpsertResult:
        """Embed and durably store ``entries`` (replacing same-id ones) with their
        verifications (one per entry, or none); searchable on return."""
        units = [entry.search_units() for entry in entries]
        texts = [text for entry_units in units for _, text in entry_units]
        vectors = self.embedder.embed(texts, progress=progress)
        rows: list[tuple[KbEntry, list[str], list[str], NDArray[np.float32]]] = []
        start = 0
        for entry, entry_units in zip(entries, units, strict=True):
            end = start + len(entry_units)
            rows.append(
                (
                    entry,
                    [u for u, _ in entry_units],
                    [t for _, t in entry_units],
                    vectors[start:end],
                )
            )
            start = end
        checked = {
            entry.id: verification
            for entry, verification in zip(entries, verifications, strict=bool(verifications))
        }
        with self._lock.write():
            version, _ = self.store.write(rows, verifications=checked)
            self._catch_up_locked()
            total = self.dense.entry_count
        counts: dict[str, int] = {}
        for verification in checked.values():
            counts[verification.verdict.value] = counts.get(verification.verdict.value, 0) + 1
        return UpsertResult(
            upserted=len(entries), total_entries=total, verdicts=counts, kb_version=version
        )

    def delete(self, entry_ids: Sequence[str]) -> DeleteResult:
        """Durably remove entries; gone from searches on return."""
        with self._lock.write():
            version, missing = self.store.write([], entry_ids)
            self._catch_up_locked()
        return DeleteResult(
            deleted=len(entry_ids) - len(missing), missing_ids=tuple(missing), kb_version=version
        )

    def reembed(self, embedder: Embedder, *, progress: bool = False) -> int:
        """Re-embed every unit with ``embedder`` and serve with it from now on (searches
        in this process wait); returns the units re-embedded. The snapshot is rewritten:
        the old one was built with the old model."""
        with self._lock.write():
            units = self.store.reembed(
                embedder.name,
                embedder.dimension,
                lambda texts: embedder.embed(texts, progress=progress),
            )
            self.embedder = embedder
            self._rebuild_locked()
            self._snapshot_locked()
        return units

    def model_changed(self) -> bool:
        """Whether another process re-embedded the store with another model since."""
        return self.store.model() != self.embedder.name

    # -- reads ---------------------------------------------------------------------
    def search_dense(
        self,
        vectors: NDArray[np.float32],
        depth: int,
        skip: Sequence[frozenset[tuple[str, str]]] = (),
    ) -> list[RankedUnits]:
        self.catch_up()
        with self._lock.read():
            return self.dense.search(vectors, depth, skip)

    def search_sparse(
        self,
        queries: Sequence[str],
        depth: int,
        skip: Sequence[frozenset[tuple[str, str]]] = (),
    ) -> list[RankedUnits]:
        self.catch_up()
        with self._lock.read():
            return self.sparse.search(queries, depth, skip)

    def added_phrasings_of(self, text: str) -> frozenset[tuple[str, str]]:
        """The ``(entry id, unit id)`` of every added phrasing (not an entry's question)
        with the words of ``text``: what a search leaves out for a query the KB was taught
        (:attr:`~._types.SearchQuery.leave_out_own_phrasing`)."""
        last = self.store.last_seq()
        cached = self._added_phrasings
        if cached is None or cached[0] != last:
            seq, units = self.store.added_phrasings()
            by_key: dict[str, set[tuple[str, str]]] = {}
            for entry_id, unit_id, unit_text in units:
                by_key.setdefault(phrasing_key(unit_text), set()).add((entry_id, unit_id))
            cached = (seq, {key: frozenset(pairs) for key, pairs in by_key.items()})
            self._added_phrasings = cached
        return cached[1].get(phrasing_key(text), frozenset())

    def entries(self, entry_ids: Sequence[str]) -> dict[str, KbEntry]:
        """Stored entries by id."""
        return self.store.entries(entry_ids)

    @property
    def self_evidenced(self) -> bool:
        """The ``self_evidenced`` policy: entries without supporting documents are served."""
        return self.store.self_evidenced()

    def set_self_evidenced(self, value: bool) -> None:
        self.store.set_self_evidenced(value)

    def content_version(self) -> str:
        """Content hash of the collection's entries (recomputed only after a change)."""
        cached = self._content_version
        if cached is None or cached[0] != self.store.last_seq():
            cached = self._content_version = self.store.content_version()
        return cached[1]

    def verified_entries(
        self, entry_ids: Sequence[str]
    ) -> tuple[int, dict[str, tuple[KbEntry, EntryVerification | None]]]:
        """The collection's version (last change) and each stored entry with its
        verification as served: the ``self_evidenced`` policy turns NO_EVIDENCE into
        SELF_EVIDENCED (so a policy change applies at once, with no re-verification)."""
        version, found = self.store.verified_entries(entry_ids)
        if self.self_evidenced:
            found = {
                entry_id: (entry, _under_policy(verification))
                for entry_id, (entry, verification) in found.items()
            }
        return version, found

    def served_entries(
        self, entry_ids: Sequence[str]
    ) -> tuple[
        int,
        dict[str, tuple[KbEntry, EntryVerification | None]],
        dict[str, SignedRecord],
        SignedRecord | None,
    ]:
        """As :meth:`verified_entries`, with each entry's signed served record and the
        collection's newest signed head (read together)."""
        version, found, signed, head = self.store.served_entries(entry_ids)
        if self.self_evidenced:
            found = {
                entry_id: (entry, _under_policy(verification))
                for entry_id, (entry, verification) in found.items()
            }
        return version, found, signed, head

    def records_to_sign(self, entry_ids: Sequence[str] | None = None) -> tuple[list[bytes], bytes]:
        """The served records of these entries (every entry when None; entries without a
        stored verification are left out: they are never served) at the collection's
        current version, and the record of that version (the head)."""
        version, content = self.store.content_version()
        if entry_ids is None:
            pairs = list(self.store.iter_verified_entries())
        else:
            pairs = list(self.store.verified_entries(entry_ids)[1].values())
        records = [
            canonical_record(entry_record(self.name, entry, verification, version))
            for entry, verification in pairs
            if verification is not None
        ]
        head = canonical_record(head_record(self.name, version, content, self.self_evidenced))
        return records, head

    def store_signatures(self, signed: Sequence[SignedRecord]) -> tuple[int, int]:
        """Keep the signed records that still describe the collection (the entry is still
        that version with that verification; the head is the current version); returns
        (stored, stale)."""
        entries: dict[str, tuple[str, SignedRecord]] = {}
        head: tuple[int, SignedRecord] | None = None
        stale = 0
        version, content = self.store.content_version()
        ids = []
        parsed = []
        for item in signed:
            record = parse_record(item.record)
            if record.get("collection") != self.name:
                stale += 1
                continue
            parsed.append((record, item))
            if record["kind"] == ENTRY_KIND:
                ids.append(str(record.get("entry_id", "")))
        _, found = self.store.verified_entries(ids)
        for record, item in parsed:
            if record["kind"] == HEAD_KIND:
                expected = head_record(self.name, version, content, self.self_evidenced)
                if canonical_record(expected) == item.record:
                    head = (version, item)
                else:
                    stale += 1
                continue
            entry_id = str(record.get("entry_id", ""))
            entry, verification = found.get(entry_id, (None, None))
            at = record.get("kb_version")
            if (
                entry is None
                or verification is None
                or not isinstance(at, int)
                or canonical_record(entry_record(self.name, entry, verification, at)) != item.record
            ):
                stale += 1
                continue
            entries[entry_id] = (str(record["entry_sha256"]), item)
        stored = self.store.set_signatures(entries, head)
        return stored + (head is not None), stale + len(entries) - stored

    def set_verifications(self, verifications: Mapping[str, EntryVerification]) -> int:
        """Store re-computed verifications (entries rewritten since are skipped)."""
        return self.store.set_verifications(verifications)

    def __len__(self) -> int:
        self.catch_up()
        return self.dense.entry_count

    def stats(self) -> CollectionStats:
        self.catch_up()
        with self._lock.read():
            return CollectionStats(
                name=self.name,
                entries=self.dense.entry_count,
                chunks=self.dense.live_rows,
                index_type=self.dense.index_type,
                dimension=self.embedder.dimension,
                embedder=self.embedder.name,
                gpu=self.dense.on_gpu,
            )

    # -- snapshots -----------------------------------------------------------------
    def snapshot(self) -> None:
        """Write index snapshots now (a restart then loads instead of rebuilding)."""
        with self._lock.write():
            self._catch_up_locked()
            self._snapshot_locked()

    def _snapshot_locked(self) -> None:
        if self.sparse.stale:
            self.sparse.refresh()
        target = self.directory / _SNAPSHOT
        fresh = self.directory / f"{_SNAPSHOT}.tmp"
        old = self.directory / f"{_SNAPSHOT}.old"
        for leftover in (fresh, old):
            shutil.rmtree(leftover, ignore_errors=True)
        fresh.mkdir()
        self.dense.save(fresh)
        self.sparse.save(fresh)
        manifest = {
            "seq": self._applied_seq,
            "embedder": self.embedder.name,
            "index_type": self.dense.index_type,
            "entries": self.dense.entry_count,
        }
        (fresh / _MANIFEST).write_text(json.dumps(manifest))
        if target.exists():
            target.rename(old)
        fresh.rename(target)
        shutil.rmtree(old, ignore_errors=True)
        self._snapshot_seq = self._applied_seq
        # Changes the snapshot covers are no longer needed to rebuild this process's
        # view; another process that lags behind them rebuilds from the store.
        self.store.prune_changes(self._applied_seq)

    def close(self) -> None:
        """Snapshot unsaved changes and close the store."""
        with self._lock.write():
            if self._applied_seq != self._snapshot_seq or not (self.directory / _SNAPSHOT).exists():
                self._snapshot_locked()
            self.store.close()


def _under_policy(verification: EntryVerification | None) -> EntryVerification | None:
    if verification is None or verification.verdict is not VerificationVerdict.NO_EVIDENCE:
        return verification
    return EntryVerification(
        verdict=VerificationVerdict.SELF_EVIDENCED,
        reason="served under the collection's self_evidenced policy: " + verification.reason,
        answer_sha256=verification.answer_sha256,
        entry_sha256=verification.entry_sha256,
        verified_at=verification.verified_at,
    )
