"""The retrieval service's domain object: named collections and their searches.

A search runs: validate → embed the queries (one batch per model: each collection
is searched with the model its store records) → the pipeline of :mod:`._search`.
An upsert verifies its
entries first (:class:`EntryVerifier`: do their chunks entail their answers?)
and stores each verdict with the entry version. Transports (gRPC, Ray Serve)
call this and only translate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np
from numpy.typing import NDArray

from ..core import (
    FailedPreconditionError,
    InternalError,
    NotFoundError,
    RetrievalSettings,
    check_deadline,
)
from ..embedding import Embedder, prefetch_query_vectors
from ..kb import KbEntry
from ._collection import Collection
from ._ranking import uses_dense
from ._rerank import Reranker
from ._retrieval_models import RetrievalModels
from ._search import QueryVectors, run_searches
from ._signing import KbSigner, SignedRecord
from ._store_files import read_content_version, stored_model
from ._types import (
    CollectionStats,
    DeleteResult,
    SearchQuery,
    SearchResult,
    SignResult,
    UpsertResult,
)
from ._validation import (
    check_batch,
    check_collection_name,
    check_delete_ids,
    check_entries,
    check_query,
)
from ._verification import (
    EntailmentChecker,
    EntryVerification,
    EntryVerifier,
    VerdictCache,
    VerificationVerdict,
)

if TYPE_CHECKING:
    from ..core import Settings

__all__ = ["KnowledgeBase", "VerifyReport", "stored_content_version", "stored_retrieval_model"]

log = logging.getLogger(__name__)

# A collection that failed to open is tried again at most this often (an operator may
# have repaired it), not at every request.
_REOPEN_AFTER_S = 60.0


@dataclass(frozen=True)
class VerifyReport:
    """What ``verify`` found: every entry's verification as served, and what it re-ran."""

    collection: str
    checker_version: str
    entries: tuple[tuple[str, EntryVerification], ...]
    """(entry id, verification) of every entry, in id order."""
    rechecked: int
    """Entries verified again (missing, unverified, or by another checker version)."""
    cached: int
    """Of those, answered from the verdict cache."""

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, verification in self.entries:
            out[verification.verdict.value] = out.get(verification.verdict.value, 0) + 1
        return out


def stored_content_version(settings: Settings, collection: str) -> str | None:
    """The content version of ``collection`` under ``data_dir/retrieval`` as a search
    reports it, read from its store without loading a model; None when it does not exist."""

    check_collection_name(collection)
    path = settings.data_dir / "retrieval" / collection / "entries.sqlite3"
    try:
        return read_content_version(path)
    except FileNotFoundError:
        return None


def stored_retrieval_model(settings: Settings, collection: str) -> str | None:
    """The model ``collection`` is searched with, named as its searches report it, read
    from its store without loading a model; None when it does not exist."""
    from ..core import embedder_version
    from ..embedding import profile_embedder_name

    check_collection_name(collection)
    model = stored_model(settings.data_dir / "retrieval" / collection / "entries.sqlite3")
    if model is not None and model == profile_embedder_name(settings):
        return embedder_version(settings)
    return model


class KnowledgeBase:
    """Collections under one root folder, searchable by hybrid retrieval.

    Args:
        root: Folder holding one sub-folder per collection.
        embedder: The profile's embedder.
        settings: Limits and retrieval knobs.
        reranker: Optional model for ``rerank=True`` searches.
        checker: Verifies entries at upsert; None stores entries with supporting
            documents as UNVERIFIED (never served until :meth:`verify` runs).
        verdict_cache: Verdicts already computed (same answer, chunks, checker).
        signer: The KB writer's signer (the admin CLI's): every write signs the served
            records it changes and the collection head. None (every retrieval server):
            writes return the records unsigned (``to_sign``) for their writer to sign.
        models: The model each collection is searched with (the one its store records);
            None: ``embedder`` for every collection.
    """

    def __init__(
        self,
        root: Path,
        embedder: Embedder,
        settings: RetrievalSettings,
        reranker: Reranker | None = None,
        *,
        checker: EntailmentChecker | None = None,
        verdict_cache: VerdictCache | None = None,
        signer: KbSigner | None = None,
        models: RetrievalModels | None = None,
    ) -> None:
        self.root = root
        self.signer = signer
        self.embedder = embedder
        self.models = models or RetrievalModels(embedder)
        self.settings = settings
        self.reranker = reranker
        self.checker = checker
        self.verdict_cache = verdict_cache
        self._collections: dict[str, Collection] = {}
        self._failed: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()
        root.mkdir(parents=True, exist_ok=True)
        # Each collection opens on its own: one that cannot is reported, the rest serve.
        for folder in sorted(root.iterdir()):
            if (folder / "entries.sqlite3").is_file():
                self._open_locked(folder.name)

    def _open_locked(self, name: str) -> Collection | None:
        """Open one collection (caller holds ``_lock``, or is the constructor); on failure
        record why and return None."""
        try:
            recorded = stored_model(self.root / name / "entries.sqlite3")
            embedder = self.models.for_collection(name, recorded)
            opened = Collection(name, self.root / name, embedder, self.settings)
        except Exception as exc:  # any failure stays with this collection
            reason = f"{type(exc).__name__}: {exc}"
            self._failed[name] = (reason, time.monotonic())
            log.exception(
                "collection failed to load; the other collections serve",
                extra={"collection": name, "error": reason},
            )
            return None
        self._failed.pop(name, None)
        self._collections[name] = opened
        return opened

    def failed_collections(self) -> dict[str, str]:
        """Collections that could not be opened, with the reason."""
        with self._lock:
            return {name: reason for name, (reason, _) in self._failed.items()}

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        reranker: Reranker | None = None,
        *,
        checker: EntailmentChecker | Literal["profile"] | None = "profile",
        signer: KbSigner | None = None,
    ) -> KnowledgeBase:
        """Load the profile's embedder and open every collection in ``data_dir/retrieval``.

        ``checker``: ``"profile"`` (default) the one ``retrieval.verifier`` names (loaded at
        the first verification), or a checker, or None (upserts store UNVERIFIED).
        """
        from ._checkers import profile_checker, profile_verdict_cache

        chosen = profile_checker(settings) if checker == "profile" else checker
        models = RetrievalModels.from_settings(settings)
        return cls(
            settings.data_dir / "retrieval",
            models.profile,
            settings.retrieval,
            reranker,
            checker=chosen,
            verdict_cache=profile_verdict_cache(settings),
            signer=signer,
            models=models,
        )

    # -- collections -----------------------------------------------------------------
    def collection_names(self) -> list[str]:
        """Open collections and those on disk (created by another process)."""
        on_disk = {p.parent.name for p in self.root.glob("*/entries.sqlite3")}
        with self._lock:
            return sorted(set(self._collections) | set(self._failed) | on_disk)

    def collection(self, name: str, *, create: bool = False) -> Collection:
        """The named collection; NOT_FOUND unless it exists or ``create``."""
        check_collection_name(name)
        with self._lock:
            found = self._collections.get(name)
        # The common case without holding the lock over the store's read: every search
        # looks its collection up.
        if found is not None and not found.model_changed():
            return found
        with self._lock:
            found = self._collections.get(name)
            failed = self._failed.get(name)
            retry = failed is None or time.monotonic() - failed[1] >= _REOPEN_AFTER_S
            # Also open one that another process (the CLI, a replica) created since.
            if (
                found is None
                and retry
                and (create or (self.root / name / "entries.sqlite3").is_file())
            ):
                found = self._open_locked(name)
            elif found is not None and found.model_changed():
                # Re-embedded by another process: reopen with the model it now records.
                found = self._open_locked(name)
            failed = self._failed.get(name)
        if found is None and failed is not None:
            raise FailedPreconditionError(
                f"collection {name!r} could not be loaded ({failed[0]}); the other "
                "collections serve. Repair or re-ingest it; `tribunal kb stats` shows why",
                field="collection",
            )
        if found is None:
            known = ", ".join(sorted(self._collections)) or "none"
            raise NotFoundError(
                f"collection {name!r} does not exist (existing: {known}); create it with an "
                "Upsert that sets create_collection, or `tribunal kb ingest`",
                field="collection",
            )
        return found

    # -- writes ---------------------------------------------------------------------
    def upsert(
        self,
        collection: str,
        entries: Sequence[KbEntry],
        *,
        create: bool = False,
        self_evidenced: bool | None = None,
        progress: bool = False,
    ) -> UpsertResult:
        """Verify, then insert or replace entries; durable and searchable when this returns.

        Args:
            self_evidenced: When not None, set the collection's policy: serve entries
                without supporting documents (an FAQ whose answer is its own source).
        """
        check_collection_name(collection)
        check_entries(entries, self.settings)
        target = self.collection(collection, create=create)
        verifier = EntryVerifier(self.checker, self.verdict_cache)
        # The models run before the collection's write lock is taken.
        verifications = verifier.verify(entries)
        # A caller that gave up would not learn of the write: do not make it.
        check_deadline("the upsert")
        if self_evidenced is not None:
            target.set_self_evidenced(self_evidenced)
        result = target.upsert(entries, verifications=verifications, progress=progress)
        to_sign = self._after_write(collection, [entry.id for entry in entries])
        return replace(result, cached=verifier.cached_, to_sign=to_sign)

    def _after_write(self, collection: str, entry_ids: Sequence[str]) -> tuple[bytes, ...]:
        """Sign what a write changed with this writer's signer, or return it to sign."""
        if self.signer is not None:
            self.sign(collection, self.signer, entry_ids)
            return ()
        records, head = self.collection(collection).records_to_sign(entry_ids)
        return (*records, head)

    def records_to_sign(
        self, collection: str, entry_ids: Sequence[str] | None = None
    ) -> tuple[bytes, ...]:
        """The served records of these entries (all when None) and the head, unsigned."""
        records, head = self.collection(collection).records_to_sign(entry_ids)
        return (*records, head)

    def store_signatures(self, collection: str, signed: Sequence[SignedRecord]) -> SignResult:
        """Store records the KB's writer signed (stale ones are skipped and counted)."""
        stored, stale = self.collection(collection).store_signatures(signed)
        return SignResult(stored=stored, stale=stale)

    def sign(
        self, collection: str, signer: KbSigner, entry_ids: Sequence[str] | None = None
    ) -> SignResult:
        """Sign the served records of these entries (every entry when None) and the
        collection head with ``signer``, and store them (``tribunal kb sign``)."""
        records, head = self.collection(collection).records_to_sign(entry_ids)
        return self.store_signatures(collection, [signer.sign(r) for r in (*records, head)])

    def verify(self, collection: str, *, recheck_all: bool = False) -> VerifyReport:
        """Verify again every entry whose stored verification is missing, UNVERIFIED, or
        made by another checker version (every entry with ``recheck_all``): after a checker
        change, or for entries written without a checker.

        Raises:
            FailedPreconditionError: no checker is configured.
        """
        if self.checker is None:
            raise FailedPreconditionError(
                "no entailment checker is configured: set retrieval.verifier to 'local' or "
                "'service' (with retrieval.verifier_address)",
                field="retrieval.verifier",
            )
        target = self.collection(collection)
        version = self.checker.version
        stale: list[KbEntry] = []
        for entry, verification in target.store.iter_verified_entries():
            if recheck_all or _needs_check(verification, version):
                stale.append(entry)
        verifier = EntryVerifier(self.checker, self.verdict_cache)
        step = max(1, self.settings.max_entries_per_request)
        for start in range(0, len(stale), step):
            part = stale[start : start + step]
            target.set_verifications(
                {e.id: v for e, v in zip(part, verifier.verify(part), strict=True)}
            )
        if self.signer is not None:
            # Re-verified entries lost their signatures; sign the whole collection again.
            self.sign(collection, self.signer)
        _, found = target.verified_entries(
            [entry.id for entry, _ in target.store.iter_verified_entries()]
        )
        return VerifyReport(
            collection=collection,
            checker_version=version,
            entries=tuple(
                (entry_id, verification or _never_verified(entry))
                for entry_id, (entry, verification) in sorted(found.items())
            ),
            rechecked=len(stale),
            cached=verifier.cached_,
        )

    def delete(self, collection: str, ids: Sequence[str]) -> DeleteResult:
        """Remove entries; durable and gone from searches when this returns."""
        check_delete_ids(ids)
        result = self.collection(collection).delete(ids)
        return replace(result, to_sign=self._after_write(collection, []))

    # -- reads ----------------------------------------------------------------------
    def stats(self, collection: str = "") -> list[CollectionStats]:
        """One collection's statistics, or every collection's when ``collection`` is empty."""
        names = [collection] if collection else self.collection_names()
        out = []
        for name in names:
            try:
                out.append(self.collection(name).stats())
            except FailedPreconditionError:
                reason = self.failed_collections().get(name)
                if reason is None:
                    raise
                out.append(
                    CollectionStats(
                        name=name,
                        entries=0,
                        chunks=0,
                        index_type="",
                        dimension=self.embedder.dimension,
                        embedder=self.embedder.name,
                        gpu=False,
                        load_error=reason,
                    )
                )
        return out

    def embed_queries(
        self,
        texts: Sequence[str],
        embedder: Embedder | None = None,
        collections: Sequence[str] = (),
    ) -> NDArray[np.float32]:
        """Query vectors by ``embedder`` (default: the profile's) in one batch; the Ray
        deployment batches across requests with it. ``collections``: each query's, so
        the matcher of that collection gets the query as retrieval embeds it."""
        embedder = embedder or self.embedder
        # Sent to the matcher's model as they reach retrieval's, not after retrieval's pass:
        # under load both models' next passes then hold the same queries, and each query
        # needs one pass of each instead of waiting for a pass of the matcher's model that
        # started before its retrieval vector was ready (bench/prefetch_order.py: ahead
        # in 7 of 10 rounds at 16 clients, 3–8% more queries/s).
        by_collection: dict[str | None, list[str]] = {}
        for i, text in enumerate(texts):
            by_collection.setdefault(collections[i] if collections else None, []).append(text)
        for collection, some in by_collection.items():
            prefetch_query_vectors(some, besides=embedder, collection=collection)
        return embedder.embed(texts)

    def embedder_of(self, collection: str) -> Embedder:
        """The embedder ``collection`` is searched with."""
        return self.collection(collection).embedder

    def reembed(self, collection: str, model: str, *, progress: bool = False) -> int:
        """Re-embed every unit of ``collection`` with ``model`` (a name its store can
        record: the profile embedder's, or ``tuned:<version>``) and search with it from
        now on; returns the units re-embedded. Entries, verifications and signatures are
        untouched: the content version stays."""
        embedder = self.models.for_collection(collection, model)
        return self.collection(collection).reembed(embedder, progress=progress)

    def validate(self, query: SearchQuery) -> None:
        """Check one query before any work (raises the caller-facing error)."""
        check_query(query, self.settings)
        if query.rerank and self.reranker is None:
            raise FailedPreconditionError(
                "this service has no reranker; search with rerank=false", field="rerank"
            )
        self.collection(query.collection)

    def search(self, query: SearchQuery) -> SearchResult:
        """One search; see :meth:`search_batch`."""
        self.validate(query)
        return run_searches(self, [query], None)[0]

    def search_batch(
        self,
        queries: Sequence[SearchQuery],
        *,
        query_vectors: NDArray[np.float32] | None = None,
    ) -> list[SearchResult]:
        """Many searches, embedded together; results in request order.

        Args:
            queries: The searches (any mix of collections and modes).
            query_vectors: Already-computed query embeddings, one row per query
                (rows of sparse-only queries are ignored); embedded here when None.
        """
        check_batch(queries, self.settings)
        for query in queries:
            self.validate(query)
        given: QueryVectors | None = None
        if query_vectors is not None:
            if query_vectors.shape != (len(queries), self.embedder.dimension):
                raise InternalError(f"query_vectors has shape {query_vectors.shape}")
            if any(self.embedder_of(q.collection) is not self.embedder for q in queries):
                raise InternalError("query_vectors are the profile model's; a collection is not")
            dense = [i for i, q in enumerate(queries) if uses_dense(q)]
            given = QueryVectors(
                {i: query_vectors[i] for i in dense}, dict.fromkeys(dense, self.embedder)
            )
        return run_searches(self, queries, given)

    def snapshot(self) -> None:
        """Snapshot every collection's indexes (those that failed to load are skipped)."""
        failed = self.failed_collections()
        for name in self.collection_names():
            if name not in failed:
                self.collection(name).snapshot()

    def close(self) -> None:
        """Snapshot and close every collection."""
        with self._lock:
            collections, self._collections = list(self._collections.values()), {}
        for collection in collections:
            collection.close()
        close = getattr(self.verdict_cache, "close", None)
        if close is not None:
            close()


def _needs_check(verification: EntryVerification | None, version: str) -> bool:
    if verification is None or verification.verdict is VerificationVerdict.UNVERIFIED:
        return True
    checked = verification.verdict in (VerificationVerdict.VERIFIED, VerificationVerdict.FAILED)
    return checked and verification.checker_version != version


def _never_verified(entry: KbEntry) -> EntryVerification:
    from ..kb import answer_sha256, entry_sha256

    return EntryVerification(
        VerificationVerdict.UNVERIFIED,
        reason="no verification is stored for this entry version",
        answer_sha256=answer_sha256(entry.answer),
        entry_sha256=entry_sha256(entry),
    )
