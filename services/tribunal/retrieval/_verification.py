"""Verifying a KB entry once, when it is written: do its supporting chunks entail its answer?

Whether an entry's evidence supports its answer does not depend on the query,
so it is checked at ``Upsert`` / ingestion and stored with the entry version;
``Answer`` then serves only entries whose stored verification passed under the
entailment checker now configured.

The answer is split into claims (its sentences; a sentence longer than the
checker takes is cut into word-aligned pieces, so a long answer is checked in
full rather than skipped). Every claim is checked against every supporting
chunk by the entailment cascade (which itself cuts long chunks and takes the
max, as MiniCheck does): a claim is supported when at least one chunk entails
it, and the entry is VERIFIED only when every claim is supported. An entry
without supporting documents — no chunks, or chunks cut from its own answer
(the COVID FAQ's form) — is NO_EVIDENCE: served only where the collection's
``self_evidenced`` policy says its answer is its own source.

The checker is a protocol (:class:`EntailmentChecker`): the entailment domain
object in this process, or a client of the entailment service. Nothing here
imports grpc or ray.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from ..core import split_sentences
from ..entailment import VERIFICATION_METHOD
from ..kb import KbEntry, answer_sha256, chunk_sentences, entry_sha256, self_sourced, sha256_hex

__all__ = [
    "SERVABLE",
    "VERIFICATION_METHOD",
    "ClaimCheck",
    "EntailmentChecker",
    "EntryVerification",
    "EntryVerifier",
    "VerdictCache",
    "VerificationVerdict",
    "split_claims",
    "verification_key",
]


class VerificationVerdict(enum.Enum):
    """Where an entry's verification stands."""

    UNVERIFIED = "unverified"
    """Not checked: no entailment checker was configured when it was written."""
    VERIFIED = "verified"
    """Every claim of the answer is entailed by at least one supporting chunk."""
    FAILED = "failed"
    """Some claim is not entailed (or is contradicted); kept, never served."""
    NO_EVIDENCE = "no_evidence"
    """No supporting documents; served only under the ``self_evidenced`` policy."""
    SELF_EVIDENCED = "self_evidenced"
    """No supporting documents, served under the collection's ``self_evidenced`` policy
    (never stored: a NO_EVIDENCE entry read from such a collection)."""


SERVABLE = frozenset({VerificationVerdict.VERIFIED, VerificationVerdict.SELF_EVIDENCED})
"""Verdicts under which an entry may be returned as an answer (the gateway also requires
a VERIFIED entry's checker version to be the one it is configured with)."""


@dataclass(frozen=True)
class ClaimCheck:
    """The checker's verdict on one (chunk, claim) pair."""

    p_entail: float
    """P(the chunk entails the claim)."""
    label: str
    """``entailed``, ``neutral``, ``contradicted`` (or ``quote_not_found``)."""


class EntailmentChecker(Protocol):
    """What verification needs from an entailment checker."""

    @property
    def version(self) -> str:
        """Checker version (models, prompt, thresholds, method): :func:`checker_version`."""
        ...

    @property
    def models(self) -> tuple[str, ...]:
        """Model ids that may decide a pair."""
        ...

    @property
    def max_hypothesis_chars(self) -> int:
        """Longest claim the checker takes."""
        ...

    @property
    def max_pairs(self) -> int:
        """Most pairs in one :meth:`check` call."""
        ...

    def check(self, pairs: Sequence[tuple[str, str]]) -> list[ClaimCheck]:
        """One verdict per (premise, hypothesis) pair, in order."""
        ...


class VerdictCache(Protocol):
    """Verifications by :func:`verification_key`: re-ingesting the same KB runs no model."""

    def get(self, key: str) -> EntryVerification | None: ...

    def put(self, key: str, verification: EntryVerification) -> None: ...


@dataclass(frozen=True)
class EntryVerification:
    """The stored verification of one entry version."""

    verdict: VerificationVerdict
    reason: str = ""
    """Why it failed or is not served; empty when verified."""
    entailed_chunk_ids: tuple[str, ...] = ()
    """Chunks that entail at least one claim, in entry order."""
    chunk_p_entail: Mapping[str, float] = field(default_factory=dict)
    """Best P(entail) over the claims, per entailed chunk."""
    checker_version: str = ""
    models: tuple[str, ...] = ()
    answer_sha256: str = ""
    """sha256 (hex) of the verified answer text."""
    entry_sha256: str = ""
    """sha256 (hex) of the whole entry: the version the verification belongs to."""
    verified_at: str = ""
    """UTC, ISO 8601."""
    claims: int = 0
    """Claims the answer was split into."""

    @property
    def servable(self) -> bool:
        return self.verdict in SERVABLE

    def to_record(self) -> dict[str, Any]:
        """JSON form (stored in the collection, and in the verdict cache)."""
        return {
            "verdict": self.verdict.value,
            "reason": self.reason,
            "entailed_chunk_ids": list(self.entailed_chunk_ids),
            "chunk_p_entail": dict(self.chunk_p_entail),
            "checker_version": self.checker_version,
            "models": list(self.models),
            "answer_sha256": self.answer_sha256,
            "entry_sha256": self.entry_sha256,
            "verified_at": self.verified_at,
            "claims": self.claims,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> EntryVerification:
        return cls(
            verdict=VerificationVerdict(record["verdict"]),
            reason=str(record.get("reason", "")),
            entailed_chunk_ids=tuple(record.get("entailed_chunk_ids", ())),
            chunk_p_entail={str(k): float(v) for k, v in record.get("chunk_p_entail", {}).items()},
            checker_version=str(record.get("checker_version", "")),
            models=tuple(record.get("models", ())),
            answer_sha256=str(record.get("answer_sha256", "")),
            entry_sha256=str(record.get("entry_sha256", "")),
            verified_at=str(record.get("verified_at", "")),
            claims=int(record.get("claims", 0)),
        )


def verification_key(entry: KbEntry, version: str) -> str:
    """Cache key: the answer's sha256, each chunk's (id, text) sha256, the checker version."""
    chunks = [sha256_hex(f"{chunk.id}\x00{chunk.text}") for chunk in entry.chunks]
    return sha256_hex(json.dumps([answer_sha256(entry.answer), chunks, version]))


_MIN_CLAIM_CHARS = 12


def split_claims(answer: str, max_chars: int) -> list[str]:
    """The answer's claims: its sentences (a fragment shorter than 12 characters joins
    the previous one), each cut into word-aligned pieces of at most ``max_chars``."""
    sentences: list[str] = []
    for sentence in split_sentences(answer):
        if sentences and len(sentence) < _MIN_CLAIM_CHARS:
            sentences[-1] = f"{sentences[-1]} {sentence}"
        else:
            sentences.append(sentence)
    claims: list[str] = []
    for sentence in sentences:
        claims.extend(c.text for c in chunk_sentences([sentence], max_chars=max_chars))
    return claims


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class EntryVerifier:
    """Verifies entries with one checker, batching every pair of a write into few calls.

    Args:
        checker: The entailment checker; None stores entries with supporting documents
            as UNVERIFIED (``tribunal kb verify`` checks them later).
        cache: Verdicts already computed for the same answer, chunks and checker.
    """

    def __init__(self, checker: EntailmentChecker | None, cache: VerdictCache | None = None):
        self.checker = checker
        self.cache = cache
        self.cached_ = 0
        """Verifications answered from the cache since construction."""

    def verify(self, entries: Sequence[KbEntry]) -> list[EntryVerification]:
        """One verification per entry, in order (model calls only for uncached ones)."""
        out: list[EntryVerification | None] = [None] * len(entries)
        todo: list[int] = []
        checker = self.checker
        version = checker.version if checker is not None else ""
        for i, entry in enumerate(entries):
            base = EntryVerification(
                VerificationVerdict.UNVERIFIED,
                answer_sha256=answer_sha256(entry.answer),
                entry_sha256=entry_sha256(entry),
                verified_at=_now(),
            )
            if not entry.answer.strip():
                out[i] = replace(
                    base,
                    verdict=VerificationVerdict.FAILED,
                    reason="the entry has no answer (a document, not servable as an answer)",
                )
            elif self_sourced(entry):
                reason = (
                    "no supporting documents: its chunks are cut from its own answer"
                    if entry.chunks
                    else "no supporting documents: the entry has no chunks"
                )
                out[i] = replace(base, verdict=VerificationVerdict.NO_EVIDENCE, reason=reason)
            elif checker is None:
                out[i] = replace(
                    base,
                    reason="not checked: no entailment checker was configured when it was "
                    "written (run `tribunal kb verify COLLECTION`)",
                )
            else:
                cached = self.cache.get(verification_key(entry, version)) if self.cache else None
                if cached is not None:
                    self.cached_ += 1
                    out[i] = replace(
                        cached,
                        answer_sha256=base.answer_sha256,
                        entry_sha256=base.entry_sha256,
                    )
                else:
                    todo.append(i)
        if todo and checker is not None:
            for i, verification in zip(todo, self._check([entries[i] for i in todo]), strict=True):
                out[i] = verification
                if self.cache is not None:
                    self.cache.put(verification_key(entries[i], version), verification)
        return [v for v in out if v is not None]

    def _check(self, entries: Sequence[KbEntry]) -> list[EntryVerification]:
        checker = self.checker
        assert checker is not None
        claims = [split_claims(entry.answer, checker.max_hypothesis_chars) for entry in entries]
        pairs: list[tuple[int, int, int]] = []  # (entry, claim, chunk)
        for e, entry in enumerate(entries):
            for c in range(len(claims[e])):
                pairs.extend(
                    (e, c, k) for k, chunk in enumerate(entry.chunks) if chunk.text.strip()
                )
        verdicts: list[ClaimCheck] = []
        step = max(1, checker.max_pairs)
        for start in range(0, len(pairs), step):
            batch = pairs[start : start + step]
            texts = [(entries[e].chunks[k].text, claims[e][c]) for e, c, k in batch]
            verdicts.extend(checker.check(texts))
        if len(verdicts) != len(pairs):
            raise RuntimeError(f"the checker returned {len(verdicts)} verdicts for {len(pairs)}")
        by_entry: dict[int, list[tuple[int, int, ClaimCheck]]] = {}
        for (e, c, k), verdict in zip(pairs, verdicts, strict=True):
            by_entry.setdefault(e, []).append((c, k, verdict))
        return [
            _verdict(entry, claims[e], by_entry.get(e, []), checker)
            for e, entry in enumerate(entries)
        ]


def _verdict(
    entry: KbEntry,
    claims: Sequence[str],
    checks: Sequence[tuple[int, int, ClaimCheck]],
    checker: EntailmentChecker,
) -> EntryVerification:
    """VERIFIED when every claim has an entailing chunk; else FAILED naming the first claim."""
    best: dict[int, tuple[float, int]] = {}
    entailed_by: dict[int, set[int]] = {}
    contradicted_by: dict[int, int] = {}
    chunk_p: dict[int, float] = {}
    for claim, chunk, verdict in checks:
        if claim not in best or verdict.p_entail > best[claim][0]:
            best[claim] = (verdict.p_entail, chunk)
        if verdict.label == "entailed":
            entailed_by.setdefault(claim, set()).add(chunk)
            chunk_p[chunk] = max(chunk_p.get(chunk, 0.0), verdict.p_entail)
        elif verdict.label == "contradicted":
            contradicted_by.setdefault(claim, chunk)
    reason = ""
    for claim, text in enumerate(claims):
        if claim in entailed_by:
            continue
        quoted = text if len(text) <= 80 else text[:77] + "..."
        if claim in contradicted_by:
            chunk_id = entry.chunks[contradicted_by[claim]].id
            reason = f"claim {claim + 1}/{len(claims)} is contradicted by chunk {chunk_id}"
        else:
            p, chunk = best.get(claim, (0.0, 0))
            reason = (
                f"claim {claim + 1}/{len(claims)} is not entailed by any supporting chunk "
                f"(best P(entail) {p:.2f}, chunk {entry.chunks[chunk].id})"
            )
        reason += f": {quoted!r}"
        break
    order = [k for k in range(len(entry.chunks)) if k in chunk_p]
    return EntryVerification(
        verdict=VerificationVerdict.FAILED if reason else VerificationVerdict.VERIFIED,
        reason=reason,
        entailed_chunk_ids=tuple(entry.chunks[k].id for k in order),
        chunk_p_entail={entry.chunks[k].id: round(chunk_p[k], 6) for k in order},
        checker_version=checker.version,
        models=tuple(checker.models),
        answer_sha256=answer_sha256(entry.answer),
        entry_sha256=entry_sha256(entry),
        verified_at=_now(),
        claims=len(claims),
    )
