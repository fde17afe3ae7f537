"""Each KB entry's evidence is verified once, when it is written, and stored with it.

With the tiny profile's LLM cascade: a supported answer is VERIFIED, an unsupported
or contradicted one FAILED (kept, never served); writing the same KB again runs no
model (the verdict cache). Over gRPC: a retrieval service without a checker stores
entries UNVERIFIED, one that calls the entailment service verifies with that
service's checker version, and search hits carry the stored verification, the
collection's version and the caller's request id. ``tribunal kb ingest`` prints
the summary; ``tribunal kb verify`` re-checks after a checker change and lists
the entries that cannot be served, with the reason.
"""

from __future__ import annotations

import time
from pathlib import Path

import grpc
import pytest
from tribunal.cli import main
from tribunal.core import Settings, load_settings
from tribunal.deploy import SERVICES
from tribunal.entailment import checker_version
from tribunal.kb import Chunk, KbEntry
from tribunal.retrieval import KnowledgeBase, SearchQuery, VerificationVerdict
from tribunal.v1 import common_pb2, retrieval_pb2, retrieval_pb2_grpc

from loadtest.verified_kb import LEXICAL_CHECKER

pytestmark = pytest.mark.models

DOC = Chunk(
    "doc-0",
    "The incubation period for COVID-19 is thought to extend to 14 days, with a median "
    "time of 4-5 days from exposure to symptoms onset. Most people with COVID-19 develop "
    "mild symptoms.",
    "Incubation",
)


def _documented(entry_id: str, question: str, answer: str) -> KbEntry:
    return KbEntry(entry_id, question, answer, chunks=(DOC,))


ENTRIES = [
    _documented("supported", "How long?", "The incubation period can extend to 14 days."),
    _documented(
        "two-claims",
        "Incubation and symptoms?",
        "The incubation period can extend to 14 days. Most people develop mild symptoms.",
    ),
    _documented("unsupported", "Pets?", "Dogs are the main source of infection for humans."),
    _documented("contradicted", "How long?", "The incubation period is always exactly 30 days."),
    KbEntry("faq", "What is COVID-19?", "COVID-19 is a disease caused by a coronavirus."),
]


def _verdicts(kb: KnowledgeBase, collection: str) -> dict[str, VerificationVerdict]:
    _, found = kb.collection(collection).verified_entries([e.id for e in ENTRIES])
    return {i: v.verdict for i, (_, v) in found.items() if v is not None}


def test_the_llm_cascade_verifies_each_entry_once(tiny_settings: Settings, tmp_path: Path) -> None:
    settings = tiny_settings.model_copy(update={"data_dir": tmp_path})
    kb = KnowledgeBase.from_settings(settings)
    try:
        first = kb.upsert("kb", ENTRIES, create=True)
        assert first.verdicts == {"verified": 2, "failed": 2, "no_evidence": 1}
        assert first.cached == 0
        assert _verdicts(kb, "kb") == {
            "supported": VerificationVerdict.VERIFIED,
            "two-claims": VerificationVerdict.VERIFIED,
            "unsupported": VerificationVerdict.FAILED,
            "contradicted": VerificationVerdict.FAILED,
            "faq": VerificationVerdict.NO_EVIDENCE,
        }
        _, found = kb.collection("kb").verified_entries(["two-claims", "unsupported"])
        verified, failed = found["two-claims"][1], found["unsupported"][1]
        assert verified is not None
        assert failed is not None
        assert verified.claims == 2
        assert verified.entailed_chunk_ids == ("doc-0",)
        assert verified.checker_version == checker_version(settings)
        assert set(verified.models) == {
            "qwen2.5-coder-0.5b-instruct",
            "qwen2.5-coder-1.5b-instruct-q4_k_m",
        }
        assert failed.reason.startswith("claim 1/1 is not entailed by any supporting chunk")
        # Re-ingesting the same KB reuses every verdict: no model runs.
        started = time.perf_counter()
        again = kb.upsert("kb", ENTRIES)
        assert (again.cached, again.verdicts) == (4, first.verdicts)
        assert time.perf_counter() - started < 30
        # Search hits carry the verification; the self_evidenced policy serves the FAQ row.
        hits = {h.entry.id: h for h in kb.search(SearchQuery("kb", "what is covid", 5)).hits}
        assert hits["faq"].verification is not None
        assert hits["faq"].verification.verdict is VerificationVerdict.NO_EVIDENCE
        kb.upsert("kb", ENTRIES[-1:], self_evidenced=True)
        result = kb.search(SearchQuery("kb", "what is covid", 5))
        faq = next(h for h in result.hits if h.entry.id == "faq")
        assert faq.verification is not None
        assert faq.verification.verdict is VerificationVerdict.SELF_EVIDENCED
        assert result.kb_version >= 3
    finally:
        kb.close()


def test_upsert_over_grpc_without_and_with_the_entailment_service(tmp_path: Path) -> None:
    def settings(**overrides: object) -> Settings:
        return load_settings(
            "tiny",
            data_dir=tmp_path,
            server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
            entailment=LEXICAL_CHECKER,
            **overrides,
        )

    entailment = SERVICES["entailment"].build_host(settings())
    entailment_port = entailment.start()
    retrieval = SERVICES["retrieval"].build_host(settings(retrieval={"verifier": "none"}))
    retrieval_port = retrieval.start()
    try:
        assert entailment.wait_until_ready(120), entailment.load_error
        assert retrieval.wait_until_ready(300), retrieval.load_error
        with grpc.insecure_channel(f"127.0.0.1:{retrieval_port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            entry = common_pb2.KbEntry(
                id="supported",
                question="How long is the incubation?",
                answer="The incubation period can extend to 14 days.",
                chunks=[common_pb2.Chunk(id=DOC.id, text=DOC.text, title=DOC.title)],
            )
            request = retrieval_pb2.UpsertRequest(
                collection="kb", entries=[entry], create_collection=True
            )
            written = stub.Upsert(request)
            assert (written.unverified, written.verified) == (1, 0)
            found = stub.Search(
                retrieval_pb2.SearchRequest(
                    collection="kb", query="incubation", top_k=1, request_id="r-1"
                )
            )
            assert found.request_id == "r-1"
            assert found.kb_version >= 1
            [hit] = found.hits
            assert hit.verification.verdict == retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED
            assert "tribunal kb verify" in hit.verification.reason
        retrieval.stop(0)
        # The same folder served by a retrieval service that calls the entailment service.
        remote = settings(
            retrieval={"verifier": "service", "verifier_address": f"127.0.0.1:{entailment_port}"}
        )
        retrieval = SERVICES["retrieval"].build_host(remote)
        retrieval_port = retrieval.start()
        assert retrieval.wait_until_ready(300), retrieval.load_error
        with grpc.insecure_channel(f"127.0.0.1:{retrieval_port}") as channel:
            stub = retrieval_pb2_grpc.RetrievalServiceStub(channel)
            written = stub.Upsert(retrieval_pb2.UpsertRequest(collection="kb", entries=[entry]))
            assert (written.verified, written.unverified) == (1, 0)
            [hit] = stub.Search(
                retrieval_pb2.SearchRequest(collection="kb", query="incubation", top_k=1)
            ).hits
            verification = hit.verification
            assert verification.verdict == retrieval_pb2.VERIFICATION_VERDICT_VERIFIED
            assert verification.checker_version == checker_version(remote)
            assert list(verification.entailed_chunk_ids) == ["doc-0"]
    finally:
        retrieval.stop(0)
        entailment.stop(0)


def test_kb_ingest_and_verify_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from tribunal.kb import entry_to_record

    path = tmp_path / "kb.jsonl"
    path.write_text("\n".join(json.dumps(entry_to_record(e)) for e in ENTRIES) + "\n")
    monkeypatch.setenv("TRIBUNAL_ENTAILMENT__FAST_BACKEND", "lexical")
    monkeypatch.setenv("TRIBUNAL_ENTAILMENT__TWO_STAGE", "false")
    assert main(["kb", "ingest", str(path), "--collection", "kb"]) == 0
    out = capsys.readouterr().out
    # The lexical stage counts content words: "Most people develop mild symptoms" and the
    # 14-day claim are in the document; dogs and 30 days are not.
    assert "verification: verified 2, failed 2, unverified 0, without evidence 1" in out
    assert "tribunal kb verify kb" in out
    # A checker change: every checked entry is verified again, failures listed with why.
    monkeypatch.setenv("TRIBUNAL_ENTAILMENT__ENTAIL_THRESHOLD", "0.99")
    assert main(["kb", "verify", "kb"]) == 1
    out = capsys.readouterr().out
    assert "re-checked 4 (0 from the cache)" in out
    assert "unsupported  FAILED  claim 1/1 is not entailed" in out
    assert "faq  NO_EVIDENCE  no supporting documents" in out
    assert main(["kb", "ingest", str(path), "--collection", "kb", "--self-evidenced"]) == 0
    assert "self-evidenced 1" in capsys.readouterr().out
    assert main(["kb", "verify", "kb", "--json"]) == 1
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()[:-1]]
    assert {r["id"]: r["verdict"] for r in rows}["faq"] == "self_evidenced"
