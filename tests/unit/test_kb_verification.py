"""Verifying KB entries once, when they are written: claims, evidence, verdicts, the cache.

The checker is the real entailment cascade with its model-free lexical stage (the
share of a claim's content words found in the chunk), so the verdict rules run
without model weights; tests/integration/test_kb_verification.py runs the
profile's LLM cascade.
"""

from __future__ import annotations

from pathlib import Path

from tribunal.core import load_settings
from tribunal.entailment import EntailmentCascade, checker_version
from tribunal.entailment._checkers import LexicalOverlapChecker
from tribunal.kb import Chunk, KbEntry, answer_sha256, entry_sha256, self_sourced
from tribunal.retrieval import VerificationVerdict
from tribunal.retrieval._checkers import CascadeChecker
from tribunal.retrieval._verdict_cache import SqliteVerdictCache
from tribunal.retrieval._verification import EntryVerifier, split_claims

DOC = Chunk(
    "doc-0",
    "The incubation period of the virus is up to 14 days. Most people develop mild symptoms.",
    "Incubation",
)


def _checker() -> CascadeChecker:
    cascade = EntailmentCascade(LexicalOverlapChecker(), None, entail_threshold=0.9)
    return CascadeChecker(cascade, "entail-test")


def test_claims_are_sentences_and_long_ones_are_cut_not_skipped() -> None:
    assert split_claims("Masks help. They do. Wash your hands often!", 2000) == [
        "Masks help. They do.",  # a fragment under 12 characters joins its sentence
        "Wash your hands often!",
    ]
    long = "word " * 1000
    claims = split_claims(long, 300)
    assert len(claims) == 17
    assert all(len(c) <= 300 for c in claims)
    assert " ".join(claims) == long.strip()


def test_chunks_cut_from_the_answer_are_no_evidence() -> None:
    answer = "Masks help. Wash your hands."
    assert self_sourced(KbEntry("a", "q", answer))
    assert self_sourced(KbEntry("a", "q", answer, chunks=(Chunk("c", "Wash  your hands."),)))
    assert not self_sourced(KbEntry("a", "q", answer, chunks=(DOC,)))


def test_verdicts_name_the_claim_and_chunk_that_decided(tmp_path: Path) -> None:
    entries = [
        KbEntry("ok", "q", "The incubation period is up to 14 days.", chunks=(DOC,)),
        KbEntry(
            "half",
            "q",
            "The incubation period is up to 14 days. Dogs spread the virus to humans.",
            chunks=(DOC,),
        ),
        KbEntry("faq", "q", "Masks help.", chunks=(Chunk("c", "Masks help."),)),
        KbEntry("doc", chunks=(DOC,)),
    ]
    verifier = EntryVerifier(_checker(), SqliteVerdictCache(tmp_path / "cache.sqlite3"))
    ok, half, faq, doc = verifier.verify(entries)
    assert ok.verdict is VerificationVerdict.VERIFIED
    assert ok.entailed_chunk_ids == ("doc-0",)
    assert ok.chunk_p_entail["doc-0"] == 1.0
    assert (ok.checker_version, ok.claims) == ("entail-test", 1)
    assert ok.answer_sha256 == answer_sha256(entries[0].answer)
    assert ok.entry_sha256 == entry_sha256(entries[0])
    assert half.verdict is VerificationVerdict.FAILED
    assert half.reason.startswith("claim 2/2 is not entailed by any supporting chunk")
    assert "Dogs spread" in half.reason
    assert faq.verdict is VerificationVerdict.NO_EVIDENCE
    assert doc.verdict is VerificationVerdict.FAILED
    assert "no answer" in doc.reason
    # The same answer, chunks and checker: answered from the cache, no checker call.
    again = EntryVerifier(None, SqliteVerdictCache(tmp_path / "cache.sqlite3"))
    again.checker = _checker()
    again.checker.check = None  # type: ignore[assignment,method-assign]
    assert [v.verdict for v in again.verify(entries[:2])] == [
        VerificationVerdict.VERIFIED,
        VerificationVerdict.FAILED,
    ]
    assert again.cached_ == 2


def test_without_a_checker_entries_with_documents_stay_unverified() -> None:
    entry = KbEntry("a", "q", "The incubation period is up to 14 days.", chunks=(DOC,))
    [verification] = EntryVerifier(None).verify([entry])
    assert verification.verdict is VerificationVerdict.UNVERIFIED
    assert "tribunal kb verify" in verification.reason
    assert not verification.servable


def test_the_checker_version_changes_with_what_decides_a_verdict() -> None:
    base = load_settings("tiny")
    same = load_settings("tiny", entailment={"max_pairs_per_request": 8})
    stricter = load_settings("tiny", entailment={"entail_threshold": 0.9})
    lexical = load_settings("tiny", entailment={"fast_backend": "lexical"})
    assert checker_version(base) == checker_version(same)
    assert len({checker_version(s) for s in (base, stricter, lexical)}) == 3
    assert checker_version(base).startswith("entail-")
