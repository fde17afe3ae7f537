"""The gateway's check that what retrieval returned is what the KB's writer signed.

Retrieval returns, with each hit, the served record the KB's writer signed for that
entry version, and with the reply, the writer's newest signed record of the collection
version (the head). Before any hit may be served the gateway checks, with the writer's
public keys (``gateway.kb_trusted_keys``):

- the head: a valid signature, this collection, the reply's version and content version
  (a reply at a newer version than the signed one serves nothing: its changes are not
  signed yet; an older one is forged), and not older than a head this gateway has
  already seen for the collection;
- each hit: a valid signature; the record's collection and entry id are the hit's;
  the entry's sha256 recomputed from the text served equals the signed one, and so do
  the answer's sha256, the verdict (a signed NO_EVIDENCE is served as SELF_EVIDENCED
  only when the signed head sets that policy), checker version, models, claims,
  entailing chunk ids and their P(entail), the evidence texts' sha256; the record is
  not older than one this gateway has seen for the entry.

A signature that does not verify under a trusted key, or a served field that differs
from its signed record, is tampering: MALFORMED, the reply is not used. A hit with no
signature, or one from a key not trusted here, is simply not servable (the reason is
audited), as is every hit when the collection has no trusted signed head.

What this proves, and what not: a hit that passes was written by the holder of a
trusted private key, as served. A replica or the network can still withhold entries,
reorder them, or serve an older signed version to a gateway that has not yet seen the
newer one.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..kb import answer_sha256, entry_from_proto, entry_sha256
from ..retrieval import (
    ENTRY_KIND,
    HEAD_KIND,
    SignatureError,
    SignedRecord,
    TrustedKeys,
)
from ..v1 import common_pb2, retrieval_pb2
from ._stages import FailureKind, StageError

__all__ = ["ProvenanceMemory", "SignedHead", "check_provenance"]

_STAGE = "retrieval"
_VERDICT_NAMES = {
    "unverified": retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED,
    "verified": retrieval_pb2.VERIFICATION_VERDICT_VERIFIED,
    "failed": retrieval_pb2.VERIFICATION_VERDICT_FAILED,
    "no_evidence": retrieval_pb2.VERIFICATION_VERDICT_NO_EVIDENCE,
}
_MEMORY_ENTRIES = 100_000
"""Entries whose newest signed version a gateway remembers (oldest forgotten first)."""
_DIGESTS_KEPT = 4096
"""Served entries whose sha256 a gateway keeps (all forgotten when full)."""


@dataclass(frozen=True)
class SignedHead:
    """What the writer signed about the collection version the hits come from."""

    kb_version: int
    kb_content_version: str
    self_evidenced: bool
    key_id: str


class ProvenanceMemory:
    """The newest signed head per collection and signed record per entry this gateway
    has seen: an older one later is a replay; and the sha256 of entries it checked
    (thread-safe, bounded)."""

    def __init__(
        self, max_entries: int = _MEMORY_ENTRIES, max_digests: int = _DIGESTS_KEPT
    ) -> None:
        self.max_entries = max_entries
        self.max_digests = max_digests
        self._heads: dict[str, int] = {}
        self._entries: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._digests: dict[bytes, str] = {}
        self._lock = threading.Lock()

    def entry_sha256(self, message: common_pb2.KbEntry) -> str:
        """The served entry's sha256 (:func:`~tribunal.kb.entry_sha256`), recomputed only
        for wire bytes not seen before.

        Why: the same entries are served again and again, and rebuilding each one and
        hashing its canonical JSON cost more than the rest of its check. A message's
        bytes determine its fields, so equal bytes (compared by their BLAKE2b-256) are an
        equal entry."""
        key = hashlib.blake2b(message.SerializeToString(deterministic=True)).digest()
        with self._lock:
            known = self._digests.get(key)
        if known is not None:
            return known
        digest = entry_sha256(entry_from_proto(message))
        with self._lock:
            if len(self._digests) >= self.max_digests:
                self._digests.clear()
            self._digests[key] = digest
        return digest

    def head(self, collection: str, version: int) -> int | None:
        """Record a head; returns the newer version seen before, if this one is older."""
        with self._lock:
            seen = self._heads.get(collection, -1)
            if version < seen:
                return seen
            self._heads[collection] = version
            return None

    def entry(self, collection: str, entry_id: str, version: int) -> int | None:
        """Record an entry's signed version; returns the newer version seen before, if
        this one is older. (Records of the same version may differ: ``tribunal kb
        verify`` re-signs entries without a write, and serving checks their checker.)"""
        key = (collection, entry_id)
        with self._lock:
            seen = self._entries.get(key)
            if seen is not None and version < seen:
                return seen
            self._entries[key] = version
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
            return None


def _malformed(message: str) -> StageError:
    return StageError(_STAGE, FailureKind.MALFORMED, message)


def _signed(message: retrieval_pb2.SignedRecord) -> SignedRecord:
    return SignedRecord(bytes(message.record), message.key_id, bytes(message.signature))


def _open(keys: TrustedKeys, message: retrieval_pb2.SignedRecord, what: str) -> dict[str, Any]:
    """The record's fields; MALFORMED for a forged one; SignatureError (not forged)
    for an unsigned or untrusted one."""
    try:
        return keys.open(_signed(message))
    except SignatureError as exc:
        if exc.forged:
            raise _malformed(f"{what}: {exc}") from exc
        raise


def check_provenance(
    response: retrieval_pb2.SearchResponse,
    hits: Sequence[retrieval_pb2.SearchHit],
    *,
    collection: str,
    keys: TrustedKeys | None,
    memory: ProvenanceMemory,
) -> tuple[SignedHead | None, dict[str, str]]:
    """The signed head (None: none trusted) and, by entry id, why a hit may not be
    served for want of a trusted signature. Raises MALFORMED for any forgery."""
    if keys is None:
        keys = TrustedKeys(None)
    if not response.HasField("kb_head"):
        reason = (
            f"collection {collection!r} has no signed version: its writer signs it with "
            "`tribunal kb sign`"
        )
        return None, {hit.entry.id: reason for hit in hits}
    try:
        record = _open(keys, response.kb_head, "the collection head")
    except SignatureError as exc:
        return None, {hit.entry.id: f"collection head: {exc}" for hit in hits}
    head = _head(record, response, collection, memory, response.kb_head.key_id)
    if head.kb_version != response.kb_version:
        # Changed since its writer last signed it (a write not signed yet): what is served
        # must be a signed version of the collection.
        reason = (
            f"collection {collection!r} is at version {response.kb_version}, its writer "
            f"signed version {head.kb_version}: the newer changes are not signed yet"
        )
        return None, {hit.entry.id: reason for hit in hits}
    refused: dict[str, str] = {}
    for position, hit in enumerate(hits, start=1):
        where = f"hit {position} ({hit.entry.id!r})"
        if not hit.HasField("served"):
            refused[hit.entry.id] = "not signed by the KB's writer (run `tribunal kb sign`)"
            continue
        try:
            signed = _open(keys, hit.served, where)
        except SignatureError as exc:
            refused[hit.entry.id] = str(exc)
            continue
        served_sha = memory.entry_sha256(hit.entry)
        problem = _check_hit(signed, hit, head, collection, where, served_sha=served_sha)
        if problem is not None:
            refused[hit.entry.id] = problem
            continue
        newer = memory.entry(collection, hit.entry.id, int(signed["kb_version"]))
        if newer is not None:
            raise _malformed(
                f"{where}: signed at version {signed['kb_version']}, older than version "
                f"{newer} of the same entry this gateway has served (a replayed entry)"
            )
    return head, refused


def _head(
    record: dict[str, Any],
    response: retrieval_pb2.SearchResponse,
    collection: str,
    memory: ProvenanceMemory,
    key_id: str,
) -> SignedHead:
    if record.get("kind") != HEAD_KIND or record.get("collection") != collection:
        raise _malformed(
            f"the signed head is of collection {record.get('collection')!r}, not {collection!r}"
        )
    version, content = record.get("kb_version"), record.get("kb_content_version")
    policy = record.get("self_evidenced")
    if not isinstance(version, int) or not isinstance(content, str) or not isinstance(policy, bool):
        raise _malformed("the signed head lacks its version, content version or policy")
    if version > response.kb_version:
        raise _malformed(
            f"the reply's kb_version {response.kb_version} is older than its signed head "
            f"({version})"
        )
    if version == response.kb_version and content != response.kb_content_version:
        raise _malformed(
            f"the reply's kb_content_version {response.kb_content_version!r} is not the "
            f"signed {content!r}"
        )
    newer = memory.head(collection, version)
    if newer is not None:
        raise _malformed(
            f"signed head of version {version}, older than version {newer} this gateway has "
            "seen (a replayed reply)"
        )
    return SignedHead(version, content, policy, key_id)


def _check_hit(
    signed: dict[str, Any],
    hit: retrieval_pb2.SearchHit,
    head: SignedHead,
    collection: str,
    where: str,
    *,
    served_sha: str,
) -> str | None:
    """MALFORMED for a served field that differs from the signed record (``served_sha``:
    the served entry's sha256); a reason (not servable) for a record signed after the
    head."""
    if signed.get("kind") != ENTRY_KIND:
        raise _malformed(f"{where}: the signed record is not an entry's")
    if signed.get("collection") != collection:
        raise _malformed(
            f"{where}: signed for collection {signed.get('collection')!r}, not {collection!r}"
        )
    if signed.get("entry_id") != hit.entry.id:
        raise _malformed(f"{where}: the signed record is of entry {signed.get('entry_id')!r}")
    version = signed.get("kb_version")
    if not isinstance(version, int):
        raise _malformed(f"{where}: the signed record has no version")
    verification = hit.verification
    if not (signed.get("entry_sha256") == served_sha == verification.entry_sha256):
        raise _malformed(f"{where}: the entry served is not the version its writer signed")
    if not (
        signed.get("answer_sha256") == answer_sha256(hit.entry.answer) == verification.answer_sha256
    ):
        raise _malformed(f"{where}: the answer served is not the one its writer signed")
    _check_verdict(signed, verification, head, where)
    chunks = {chunk.id: chunk.text for chunk in hit.entry.chunks}
    evidence = signed.get("evidence_sha256")
    if not isinstance(evidence, dict) or set(evidence) != set(verification.entailed_chunk_ids):
        raise _malformed(f"{where}: the evidence served is not the evidence its writer signed")
    for chunk_id, digest in evidence.items():
        text = chunks.get(chunk_id)
        if text is None or hashlib.sha256(text.encode("utf-8")).hexdigest() != digest:
            raise _malformed(f"{where}: evidence chunk {chunk_id!r} is not the text signed")
    if version > head.kb_version:
        return (
            f"signed at version {version}, after the collection's signed version "
            f"{head.kb_version} (its head is not signed yet)"
        )
    return None


def _check_verdict(
    signed: dict[str, Any],
    verification: retrieval_pb2.EntryVerification,
    head: SignedHead,
    where: str,
) -> None:
    stored = signed.get("verdict")
    expected = _VERDICT_NAMES.get(str(stored))
    if expected is None:
        raise _malformed(f"{where}: signed verdict {stored!r} is unknown")
    self_evidenced = stored == "no_evidence" and head.self_evidenced
    if self_evidenced:
        expected = retrieval_pb2.VERIFICATION_VERDICT_SELF_EVIDENCED
    if verification.verdict != expected:
        served = retrieval_pb2.VerificationVerdict.Name(verification.verdict)
        raise _malformed(
            f"{where}: served as {served}, its writer signed {str(stored).upper()}"
            + (" under the self_evidenced policy" if self_evidenced else "")
        )
    if verification.verified_at != signed.get("verified_at"):
        raise _malformed(f"{where}: verified_at differs from the signed record")
    if self_evidenced:
        # Served under the policy: the stored verification's checker fields do not apply.
        if verification.entailed_chunk_ids or verification.chunk_p_entail:
            raise _malformed(f"{where}: SELF_EVIDENCED naming entailing chunks")
        return
    same = (
        verification.checker_version == signed.get("checker_version")
        and list(verification.models) == signed.get("models")
        and verification.claims == signed.get("claims")
        and list(verification.entailed_chunk_ids) == signed.get("entailed_chunk_ids")
        and dict(verification.chunk_p_entail) == signed.get("chunk_p_entail")
    )
    if not same:
        raise _malformed(f"{where}: the verification served is not the one its writer signed")
