"""Signed served records: what lets the gateway prove that an answer comes from the KB.

The KB's writer (the admin path: ``tribunal kb ingest|delete|verify|sign``, ``tribunal
demo``, or an admin client of ``Upsert``) signs, with an Ed25519 private key only it
holds, one *served record* per entry — collection, entry id and sha256, answer sha256,
the stored verification (verdict, checker version, entailing chunks and their
P(entail)), the sha256 of every entailing chunk's text, and the collection version it
was signed at — and one *head record* per collection version (the version, its content
hash, the ``self_evidenced`` policy). Retrieval stores the signatures next to the
entries and returns them with every hit; the gateway checks them with public keys
(:class:`TrustedKeys`) before it serves anything.

Retrieval servers never load the private key: a replica, or anything on the wire, can
withhold entries, reorder them, or keep serving an older signed version, but cannot
make up or alter one. Nothing here imports grpc or ray.

Ed25519 from ``cryptography`` rather than a hand-rolled scheme; the signed bytes are the
record's canonical JSON behind a domain-separation prefix, so a signature over one kind
of record is never valid for another use.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import (
    Ed25519PrivateKey,
    Ed25519PublicKey,
)

from ..core import FailedPreconditionError
from ..kb import KbEntry, answer_sha256, entry_sha256
from ._verification import EntryVerification

if TYPE_CHECKING:
    from ..core import Settings

__all__ = [
    "ENTRY_KIND",
    "HEAD_KIND",
    "MAX_RECORD_BYTES",
    "KbSigner",
    "SignatureError",
    "SignedRecord",
    "TrustedKeys",
    "canonical_record",
    "entry_record",
    "head_record",
    "key_id_of",
    "key_paths",
    "load_or_create_signer",
    "parse_record",
    "sign_all",
    "trust",
    "trusted_keys",
    "writer_signer",
]

log = logging.getLogger(__name__)

ENTRY_KIND = "tribunal.kb-entry.v1"
HEAD_KIND = "tribunal.kb-head.v1"
_PREFIX = b"tribunal signed KB record\x00"
MAX_RECORD_BYTES = 1 << 20
"""Longest record a reader parses (a record names a bounded entry's chunk ids and hashes)."""


class SignatureError(Exception):
    """A signed record that does not check out; ``forged`` tells a bad signature under a
    trusted key (tampering) from a record no trusted key signed (unsigned, or a retired
    key)."""

    def __init__(self, message: str, *, forged: bool) -> None:
        super().__init__(message)
        self.forged = forged


@dataclass(frozen=True)
class SignedRecord:
    """A record's canonical bytes, the id of the key that signed it, and the signature
    (empty ``signature``: not signed yet, as an Upsert returns it for its writer)."""

    record: bytes
    key_id: str = ""
    signature: bytes = b""

    def to_json(self) -> str:
        return json.dumps(
            {
                "record": self.record.decode("utf-8"),
                "key_id": self.key_id,
                "signature": base64.b64encode(self.signature).decode("ascii"),
            },
            ensure_ascii=False,
        )

    @classmethod
    def from_json(cls, text: str) -> SignedRecord:
        value = json.loads(text)
        return cls(
            value["record"].encode("utf-8"),
            str(value["key_id"]),
            base64.b64decode(value["signature"]),
        )


def canonical_record(record: Mapping[str, Any]) -> bytes:
    """The bytes that are signed: sorted keys, no spaces, UTF-8."""
    return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )


def parse_record(data: bytes) -> dict[str, Any]:
    """A record's fields; raises :class:`SignatureError` for anything not one."""
    if len(data) > MAX_RECORD_BYTES:
        raise SignatureError(f"record of {len(data)} bytes is over the limit", forged=True)
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SignatureError(f"record is not JSON: {exc}", forged=True) from exc
    if not isinstance(value, dict) or value.get("kind") not in (ENTRY_KIND, HEAD_KIND):
        raise SignatureError("record is not a KB entry or head record", forged=True)
    if canonical_record(value) != data:
        raise SignatureError("record is not in canonical form", forged=True)
    return value


def entry_record(
    collection: str, entry: KbEntry, verification: EntryVerification, kb_version: int
) -> dict[str, Any]:
    """The served record of one stored entry version with its stored verification."""
    chunks = {chunk.id: chunk.text for chunk in entry.chunks}
    return {
        "kind": ENTRY_KIND,
        "collection": collection,
        "entry_id": entry.id,
        "entry_sha256": entry_sha256(entry),
        "answer_sha256": answer_sha256(entry.answer),
        "verdict": verification.verdict.value,
        "checker_version": verification.checker_version,
        "models": list(verification.models),
        "claims": verification.claims,
        "verified_at": verification.verified_at,
        "entailed_chunk_ids": list(verification.entailed_chunk_ids),
        "chunk_p_entail": dict(verification.chunk_p_entail),
        "evidence_sha256": {
            chunk_id: hashlib.sha256(chunks.get(chunk_id, "").encode("utf-8")).hexdigest()
            for chunk_id in verification.entailed_chunk_ids
        },
        "kb_version": kb_version,
    }


def head_record(
    collection: str, kb_version: int, kb_content_version: str, self_evidenced: bool
) -> dict[str, Any]:
    """The record of one collection version."""
    return {
        "kind": HEAD_KIND,
        "collection": collection,
        "kb_version": kb_version,
        "kb_content_version": kb_content_version,
        "self_evidenced": self_evidenced,
    }


def key_id_of(public_key: Ed25519PublicKey) -> str:
    """``kb-`` + 16 hex of the sha256 of the raw public key."""
    raw = public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "kb-" + hashlib.sha256(raw).hexdigest()[:16]


class KbSigner:
    """Signs records with one Ed25519 private key (the KB writer's)."""

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._key = private_key
        self.public_key = private_key.public_key()
        self.key_id = key_id_of(self.public_key)

    def sign(self, record: bytes) -> SignedRecord:
        return SignedRecord(record, self.key_id, self._key.sign(_PREFIX + record))

    def public_pem(self) -> bytes:
        return self.public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    @classmethod
    def generate(cls) -> KbSigner:
        return cls(Ed25519PrivateKey.generate())


def _write_private(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def load_or_create_signer(
    private_key_file: Path, trusted_dir: Path, *, create: bool = True, rotate: bool = False
) -> tuple[KbSigner, bool]:
    """The writer's signer from ``private_key_file``; on first use (or with ``rotate``) a
    new key is made there (0600) and its public key written into ``trusted_dir``.
    Returns the signer and whether a key was created.

    Raises:
        FailedPreconditionError: no key file and ``create`` is off, or it is unreadable.
    """
    if rotate and private_key_file.exists():
        old = _load_private(private_key_file)
        retired = private_key_file.with_name(f"{private_key_file.name}.{old.key_id}.retired")
        private_key_file.rename(retired)
    if not private_key_file.exists():
        if not create:
            raise FailedPreconditionError(
                f"no KB signing key at {private_key_file}: run `tribunal kb sign` once to "
                "create it (or set retrieval.signing_key_file)",
                field="retrieval.signing_key_file",
            )
        signer = KbSigner.generate()
        _write_private(
            private_key_file,
            signer._key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )
        trust(signer, trusted_dir)
        return signer, True
    signer = _load_private(private_key_file)
    return signer, False


def trust(signer: KbSigner, trusted_dir: Path) -> Path:
    """Write the signer's public key into ``trusted_dir`` (``<key id>.pub``)."""
    trusted_dir.mkdir(parents=True, exist_ok=True)
    target = trusted_dir / f"{signer.key_id}.pub"
    target.write_bytes(signer.public_pem())
    return target


def _load_private(path: Path) -> KbSigner:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError) as exc:
        raise FailedPreconditionError(
            f"cannot read the KB signing key {path}: {exc}", field="retrieval.signing_key_file"
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise FailedPreconditionError(
            f"{path} is not an Ed25519 private key", field="retrieval.signing_key_file"
        )
    return KbSigner(key)


_VERIFIED_KEPT = 16_384
"""Most checked signatures :class:`TrustedKeys` remembers (then it starts over)."""


class TrustedKeys:
    """The public keys whose signatures are accepted, by key id: every ``*.pub`` (PEM)
    in a folder, or one file. Read again when the folder changes (checked at most once a
    second), so a key can be added or retired without a restart.
    """

    def __init__(self, path: Path | None, keys: Mapping[str, Ed25519PublicKey] | None = None):
        self.path = path
        self._keys: dict[str, Ed25519PublicKey] = dict(keys or {})
        self._stamp: tuple[tuple[str, float], ...] | None = None
        self._checked = 0.0
        self._lock = threading.Lock()
        # Signatures already checked, by the exact (key id, signature, record) they were
        # checked on: the same served records come back query after query, and an
        # Ed25519 check costs more than the rest of reading a hit. The key is looked up
        # (trusted now) before this memory is; a reload of the keys empties it.
        self._verified: set[tuple[str, bytes, bytes]] = set()
        if path is not None:
            self._reload()

    @classmethod
    def of(cls, *public_keys: Ed25519PublicKey) -> TrustedKeys:
        return cls(None, {key_id_of(key): key for key in public_keys})

    def _files(self) -> list[Path]:
        assert self.path is not None
        if self.path.is_file():
            return [self.path]
        if self.path.is_dir():
            return sorted(self.path.glob("*.pub"))
        return []

    def _reload(self) -> None:
        files = self._files()
        stamp = tuple((str(f), f.stat().st_mtime) for f in files)
        if stamp == self._stamp:
            return
        keys: dict[str, Ed25519PublicKey] = {}
        for file in files:
            try:
                key = serialization.load_pem_public_key(file.read_bytes())
            except (OSError, ValueError) as exc:
                log.error("unreadable KB public key", extra={"file": str(file), "why": str(exc)})
                continue
            if isinstance(key, Ed25519PublicKey):
                keys[key_id_of(key)] = key
        self._keys, self._stamp = keys, stamp
        self._verified = set()

    def key_ids(self) -> list[str]:
        self._refresh()
        return sorted(self._keys)

    def _refresh(self) -> None:
        if self.path is None:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._checked >= 1.0:
                self._checked = now
                self._reload()

    def open(self, signed: SignedRecord) -> dict[str, Any]:
        """The record's fields once its signature checks out under a trusted key.

        Raises:
            SignatureError: unsigned, signed by a key not trusted here (``forged``
                False), or a signature that does not verify, or not a record
                (``forged`` True).
        """
        self._refresh()
        if not signed.signature:
            raise SignatureError("not signed by the KB's writer", forged=False)
        key = self._keys.get(signed.key_id)
        if key is None:
            raise SignatureError(
                f"signed by key {signed.key_id!r}, which is not trusted here "
                f"(trusted: {', '.join(sorted(self._keys)) or 'none'})",
                forged=False,
            )
        checked = (signed.key_id, signed.signature, signed.record)
        if checked not in self._verified:
            try:
                key.verify(signed.signature, _PREFIX + signed.record)
            except InvalidSignature as exc:
                raise SignatureError(
                    f"the signature of key {signed.key_id} does not match the record",
                    forged=True,
                ) from exc
            verified = self._verified
            if len(verified) >= _VERIFIED_KEPT:
                verified.clear()
            verified.add(checked)
        return parse_record(signed.record)


def sign_all(signer: KbSigner, records: Sequence[bytes]) -> list[SignedRecord]:
    """Sign each record."""
    return [signer.sign(record) for record in records]


def key_paths(settings: Settings) -> tuple[Path, Path]:
    """(the writer's private key file, the folder of trusted public keys)."""
    keys = settings.data_dir / "keys"
    private = settings.retrieval.signing_key_file or keys / "kb-signing.key"
    trusted = settings.gateway.kb_trusted_keys or keys / "kb-trusted"
    return private.expanduser(), trusted.expanduser()


def writer_signer(
    settings: Settings, *, create: bool = True, rotate: bool = False
) -> tuple[KbSigner, bool]:
    """The KB writer's signer (admin commands only); see :func:`load_or_create_signer`."""
    private, trusted = key_paths(settings)
    return load_or_create_signer(private, trusted, create=create, rotate=rotate)


def trusted_keys(settings: Settings) -> TrustedKeys:
    """The public keys the gateway accepts (``gateway.kb_trusted_keys``)."""
    return TrustedKeys(key_paths(settings)[1])
