"""The gateway decides; stages advise: replies rewritten in transit never produce an ACCEPT.

Real stage servers (retrieval over a verified COVID FAQ KB, the feature matcher,
the confidence service with the shipped calibrator at a plain 0.5 threshold)
sit behind a real gRPC proxy (``_tamper_proxy``) that rewrites their replies
the way a faulty network or an attacker would. Untampered, the paraphrase is
answered from the KB and the off-topic question falls back; under every mode
the gateway falls back with the right reason and stage, and writes the audit
row — on SQLite and on PostgreSQL.

The KB is signed by its writer (the fixture holds the private key; the stage server
never does). Beyond replies that contradict themselves, the modes rewrite replies so
that they agree with themselves but not with the KB: an injected answer with every hash
recomputed, FAILED / NO_EVIDENCE / stale-checker entries relabelled VERIFIED or
SELF_EVIDENCED, answers swapped between hits, another collection's signed entry,
forged versions and evidence texts, copied, re-keyed, truncated, attacker-signed and
missing signatures, and an entry version replayed after an update.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
import pytest
from tribunal.core import Settings, load_settings
from tribunal.core.server import ServiceHost
from tribunal.core.storage import Database
from tribunal.entailment import checker_version
from tribunal.gateway._wiring import build_stage_host
from tribunal.gateway.servicer import build_host
from tribunal.kb import Chunk, KbEntry, answer_sha256, entry_from_proto, entry_sha256
from tribunal.retrieval import (
    KbSigner,
    KnowledgeBase,
    canonical_record,
    parse_record,
    writer_signer,
)
from tribunal.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc, retrieval_pb2

from loadtest.verified_kb import LEXICAL_CHECKER, verified_faq_entries
from tests.conftest import SHARED
from tests.integration._tamper_proxy import Mode, TamperProxy

pytestmark = [pytest.mark.models, pytest.mark.tamper]

FAQ = SHARED / "data" / "covid-qa" / "faq_kb_en.jsonl"
COLLECTION = "covid-verified"
PARAPHRASE = "What can I do to protect my child from COVID-19?"
OFF_TOPIC = "Who won the 1998 football world cup?"
MALFORMED = "MALFORMED_RESPONSE"
UNVERIFIED = "UNVERIFIED"
VERIFIED = retrieval_pb2.VERIFICATION_VERDICT_VERIFIED
BLEACH = "Bathe your dog in diluted bleach every day."
BLEACH_QUERY = "Should I bathe my dog in bleach to protect it from COVID-19?"
OTHER = "pets-other"
"""A second collection holding a verified, signed bleach entry."""
CAPTURED: dict[str, Any] = {}
"""Replies the fixture captured for the modes that splice them in (``foreign``)."""
RELABELLED: dict[str, int] = {}
"""Hits whose verdict a relabelling mode changed, by mode name."""
ATTACKER = KbSigner.generate()


# -- the modes ---------------------------------------------------------------------------


def _set(field: str, value: Any, *, everywhere: bool = False) -> Any:
    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        hits = reply.hits if everywhere else reply.hits[:1]
        for hit in hits:
            target, _, name = field.rpartition(".")
            setattr(hit if not target else getattr(hit, target), name, value)
        return reply

    return rewrite


def _verdict(verdict: int, reason: str = "") -> Any:
    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        for hit in reply.hits:
            hit.verification.verdict = verdict
            hit.verification.reason = reason
            del hit.verification.entailed_chunk_ids[:]
            hit.verification.chunk_p_entail.clear()
        return reply

    return rewrite


def _no_evidence(request: Any, reply: Any, previous: Any) -> Any:
    """VERIFIED, but naming no entailing chunk."""
    for hit in reply.hits:
        del hit.verification.entailed_chunk_ids[:]
        hit.verification.chunk_p_entail.clear()
    return reply


def _drop_verification(request: Any, reply: Any, previous: Any) -> Any:
    for hit in reply.hits:
        hit.ClearField("verification")
    return reply


def _duplicate_hit(request: Any, reply: Any, previous: Any) -> Any:
    reply.hits[1].CopyFrom(reply.hits[0])
    reply.hits[1].rank = 2
    return reply


def _replay(request: Any, reply: Any, previous: Any) -> Any:
    """The reply of the previous request instead of this one's."""
    assert previous is not None, "a replay needs an earlier request"
    return previous


def _checker(request: Any, reply: Any, previous: Any) -> Any:
    for hit in reply.hits:
        if hit.verification.verdict == VERIFIED:
            hit.verification.checker_version = "entail-000000000000"
    return reply


def _results(field: str, value: Any) -> Any:
    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        setattr(reply.results[0], field, value)
        return reply

    return rewrite


def _match_contradicts(request: Any, reply: Any, previous: Any) -> Any:
    reply.results[0].p_match = 1.0
    reply.results[0].match = False
    return reply


def _reverse(request: Any, reply: Any, previous: Any) -> Any:
    results = list(reversed(reply.results))
    del reply.results[:]
    reply.results.extend(results)
    return reply


def _duplicate_result(request: Any, reply: Any, previous: Any) -> Any:
    reply.results[1].CopyFrom(reply.results[0])
    return reply


def _drop_last(request: Any, reply: Any, previous: Any) -> Any:
    del reply.results[-1]
    return reply


def _other_request(request: Any, reply: Any, previous: Any) -> Any:
    reply.request_id = uuid.uuid4().hex
    return reply


def _accept(**fields: Any) -> Any:
    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        for result in reply.results:
            result.decision = common_pb2.DECISION_ACCEPT
            for name, value in fields.items():
                setattr(result, name, value)
        return reply

    return rewrite


def _drop_score_fields(request: Any, reply: Any, previous: Any) -> Any:
    for result in reply.results:
        result.ClearField("threshold")
        result.ClearField("calibrator_version")
        result.ClearField("alpha")
    return reply


def _inject(*, recompute_entry: bool) -> Any:
    """The top answer replaced, its sha256 (and the entry's) recomputed to agree."""

    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        hit = reply.hits[0]
        hit.entry.answer = BLEACH
        hit.verification.answer_sha256 = answer_sha256(BLEACH)
        if recompute_entry:
            hit.verification.entry_sha256 = entry_sha256(entry_from_proto(hit.entry))
        return reply

    return rewrite


def _relabel(verdict: int, name: str) -> Any:
    """Every hit not VERIFIED relabelled ``verdict``: naming its chunks as entailing, by
    the configured checker, with all hashes consistent."""

    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        current = CAPTURED["checker_version"]
        for hit in reply.hits:
            verification = hit.verification
            if verification.verdict == VERIFIED and verification.checker_version == current:
                continue
            RELABELLED[name] = RELABELLED.get(name, 0) + 1
            verification.verdict = verdict  # type: ignore[assignment]
            verification.reason = ""
            del verification.entailed_chunk_ids[:]
            verification.chunk_p_entail.clear()
            if verdict == VERIFIED:
                chunk_ids = [chunk.id for chunk in hit.entry.chunks]
                if not chunk_ids:  # a VERIFIED entry needs a chunk: give it its answer
                    hit.entry.chunks.add(id="doc-0", text=hit.entry.answer)
                    chunk_ids = ["doc-0"]
                    verification.entry_sha256 = entry_sha256(entry_from_proto(hit.entry))
                verification.entailed_chunk_ids.extend(chunk_ids)
                for chunk_id in chunk_ids:
                    verification.chunk_p_entail[chunk_id] = 0.99
                verification.checker_version = current
        return reply

    return rewrite


def _swap_answers(request: Any, reply: Any, previous: Any) -> Any:
    """The answers (and their hashes) of the first two hits exchanged."""
    first, second = reply.hits[0], reply.hits[1]
    first.entry.answer, second.entry.answer = second.entry.answer, first.entry.answer
    for hit in (first, second):
        hit.verification.answer_sha256 = answer_sha256(hit.entry.answer)
        hit.verification.entry_sha256 = entry_sha256(entry_from_proto(hit.entry))
    return reply


def _foreign_entry(request: Any, reply: Any, previous: Any) -> Any:
    """The top hit replaced by another collection's signed entry (its scores kept)."""
    foreign = CAPTURED["foreign"].hits[0]
    hit = reply.hits[0]
    hit.entry.CopyFrom(foreign.entry)
    hit.verification.CopyFrom(foreign.verification)
    hit.served.CopyFrom(foreign.served)
    return reply


def _foreign_head(request: Any, reply: Any, previous: Any) -> Any:
    reply.kb_head.CopyFrom(CAPTURED["foreign"].kb_head)
    return reply


def _reply_field(field: str, value: Any) -> Any:
    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        setattr(reply, field, value)
        return reply

    return rewrite


def _evidence_text(request: Any, reply: Any, previous: Any) -> Any:
    """The top hit's entailing chunk says something else (hashes recomputed)."""
    hit = reply.hits[0]
    chunks = {chunk.id: chunk for chunk in hit.entry.chunks}
    chunks[hit.verification.entailed_chunk_ids[0]].text = BLEACH
    hit.verification.entry_sha256 = entry_sha256(entry_from_proto(hit.entry))
    return reply


def _copy_signature(request: Any, reply: Any, previous: Any) -> Any:
    reply.hits[0].served.CopyFrom(reply.hits[1].served)
    return reply


def _every_served(change: Any) -> Any:
    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        for hit in reply.hits:
            change(hit)
        return reply

    return rewrite


def _attacker_signs(*, claim_trusted_id: bool) -> Any:
    """The top answer injected and its record re-made to match, signed with the
    attacker's own key (under its own id, or claiming the trusted key's id)."""

    def rewrite(request: Any, reply: Any, previous: Any) -> Any:
        hit = reply.hits[0]
        hit.entry.answer = BLEACH
        hit.verification.answer_sha256 = answer_sha256(BLEACH)
        hit.verification.entry_sha256 = entry_sha256(entry_from_proto(hit.entry))
        record = parse_record(hit.served.record)
        record["answer_sha256"] = hit.verification.answer_sha256
        record["entry_sha256"] = hit.verification.entry_sha256
        signed = ATTACKER.sign(canonical_record(record))
        hit.served.record = signed.record
        hit.served.signature = signed.signature
        if not claim_trusted_id:
            hit.served.key_id = signed.key_id
        if not claim_trusted_id:
            # Every other hit unsigned too, so no genuine entry can be served instead.
            for other in reply.hits[1:]:
                other.ClearField("served")
        return reply

    return rewrite


def _truncate(hit: Any) -> None:
    hit.served.signature = hit.served.signature[:32]


def _rekey(hit: Any) -> None:
    hit.served.key_id = "kb-0000000000000000"


def _unsign(hit: Any) -> None:
    hit.ClearField("served")


def _drop_head(request: Any, reply: Any, previous: Any) -> Any:
    reply.ClearField("kb_head")
    return reply


def _rekey_head(request: Any, reply: Any, previous: Any) -> Any:
    reply.kb_head.key_id = "kb-0000000000000000"
    return reply


MODES = [
    # retrieval
    Mode("bm25-1e300", "retrieval", _set("sparse_score", 1e300), MALFORMED, "retrieval"),
    Mode("dense-nan", "retrieval", _set("dense_score", math.nan), MALFORMED, "retrieval"),
    Mode("vote-2.0", "retrieval", _set("neighbour_vote", 2.0), MALFORMED, "retrieval"),
    Mode("fused-score-0.9", "retrieval", _set("score", 0.9), MALFORMED, "retrieval"),
    Mode(
        "answer-altered",
        "retrieval",
        _set("entry.answer", "Drink disinfectant to cure it."),
        MALFORMED,
        "retrieval",
    ),
    Mode(
        "sha256-altered",
        "retrieval",
        _set("verification.answer_sha256", answer_sha256("something else")),
        MALFORMED,
        "retrieval",
    ),
    Mode("verification-dropped", "retrieval", _drop_verification, MALFORMED, "retrieval"),
    Mode(
        "verdict-out-of-enum", "retrieval", _set("verification.verdict", 42), MALFORMED, "retrieval"
    ),
    Mode("verified-without-evidence", "retrieval", _no_evidence, MALFORMED, "retrieval"),
    Mode(
        "self-evidenced-with-documents",
        "retrieval",
        _verdict(retrieval_pb2.VERIFICATION_VERDICT_SELF_EVIDENCED),
        MALFORMED,
        "retrieval",
    ),
    Mode("hit-duplicated", "retrieval", _duplicate_hit, MALFORMED, "retrieval"),
    Mode("search-reply-replayed", "retrieval", _replay, MALFORMED, "retrieval"),
    # Relabelled down: the reply no longer agrees with the signed records.
    Mode(
        "entries-unverified",
        "retrieval",
        _verdict(retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED),
        MALFORMED,
        "retrieval",
    ),
    Mode(
        "verification-contradicted",
        "retrieval",
        _verdict(retrieval_pb2.VERIFICATION_VERDICT_FAILED, "claim 1/1 is contradicted by doc-0"),
        MALFORMED,
        "retrieval",
    ),
    Mode("foreign-checker-version", "retrieval", _checker, MALFORMED, "retrieval"),
    # Rewrites that agree with themselves, not with the KB.
    Mode(
        "answer-injected-sha-recomputed",
        "retrieval",
        _inject(recompute_entry=False),
        MALFORMED,
        "retrieval",
    ),
    Mode(
        "answer-injected-all-hashes-recomputed",
        "retrieval",
        _inject(recompute_entry=True),
        MALFORMED,
        "retrieval",
    ),
    Mode(
        "not-servable-relabelled-verified",
        "retrieval",
        _relabel(VERIFIED, "not-servable-relabelled-verified"),
        MALFORMED,
        "retrieval",
        query=BLEACH_QUERY,
    ),
    Mode(
        "not-servable-relabelled-self-evidenced",
        "retrieval",
        _relabel(
            retrieval_pb2.VERIFICATION_VERDICT_SELF_EVIDENCED,
            "not-servable-relabelled-self-evidenced",
        ),
        MALFORMED,
        "retrieval",
        query=BLEACH_QUERY,
    ),
    Mode("answers-swapped-between-hits", "retrieval", _swap_answers, MALFORMED, "retrieval"),
    Mode("entry-of-another-collection", "retrieval", _foreign_entry, MALFORMED, "retrieval"),
    Mode("head-of-another-collection", "retrieval", _foreign_head, MALFORMED, "retrieval"),
    Mode("kb-version-forged-up", "retrieval", _reply_field("kb_version", 10**9), UNVERIFIED, ""),
    Mode(
        "kb-version-forged-down", "retrieval", _reply_field("kb_version", 0), MALFORMED, "retrieval"
    ),
    Mode(
        "kb-content-version-forged",
        "retrieval",
        _reply_field("kb_content_version", "kb-0123456789abcdef"),
        MALFORMED,
        "retrieval",
    ),
    Mode(
        "entry-sha256-forged",
        "retrieval",
        _set("verification.entry_sha256", "0" * 64),
        MALFORMED,
        "retrieval",
    ),
    Mode("evidence-text-forged", "retrieval", _evidence_text, MALFORMED, "retrieval"),
    Mode("signature-copied-from-another-hit", "retrieval", _copy_signature, MALFORMED, "retrieval"),
    Mode("signatures-truncated", "retrieval", _every_served(_truncate), MALFORMED, "retrieval"),
    Mode("key-ids-swapped", "retrieval", _every_served(_rekey), UNVERIFIED, ""),
    Mode("signatures-stripped", "retrieval", _every_served(_unsign), UNVERIFIED, ""),
    Mode("head-stripped", "retrieval", _drop_head, UNVERIFIED, ""),
    Mode("head-key-id-swapped", "retrieval", _rekey_head, UNVERIFIED, ""),
    Mode(
        "attacker-signed-under-own-key",
        "retrieval",
        _attacker_signs(claim_trusted_id=False),
        UNVERIFIED,
        "",
    ),
    Mode(
        "attacker-signed-claiming-trusted-key",
        "retrieval",
        _attacker_signs(claim_trusted_id=True),
        MALFORMED,
        "retrieval",
    ),
    # ensemble
    Mode("p-match-1-match-false", "ensemble", _match_contradicts, MALFORMED, "ensemble"),
    Mode("match-results-reordered", "ensemble", _reverse, MALFORMED, "ensemble"),
    Mode("match-result-duplicated", "ensemble", _duplicate_result, MALFORMED, "ensemble"),
    Mode("match-result-dropped", "ensemble", _drop_last, MALFORMED, "ensemble"),
    Mode("match-reply-for-another-request", "ensemble", _other_request, MALFORMED, "ensemble"),
    Mode("p-match-nan", "ensemble", _results("p_match", math.nan), MALFORMED, "ensemble"),
    # confidence
    Mode(
        "accept-at-0.01-threshold-0.99",
        "confidence",
        _accept(confidence=0.01, threshold=0.99),
        MALFORMED,
        "confidence",
        off_topic=True,
    ),
    Mode(
        "accept-threshold-minus-5",
        "confidence",
        _accept(threshold=-5.0),
        MALFORMED,
        "confidence",
        off_topic=True,
    ),
    Mode(
        "accept-threshold-1e9",
        "confidence",
        _accept(threshold=1e9),
        MALFORMED,
        "confidence",
        off_topic=True,
    ),
    Mode(
        "confidence-inflated-0.999",
        "confidence",
        _accept(confidence=0.999),
        MALFORMED,
        "confidence",
        off_topic=True,
    ),
    Mode(
        "foreign-calibrator-version",
        "confidence",
        _accept(calibrator_version="platt-000000000000"),
        MALFORMED,
        "confidence",
        off_topic=True,
    ),
    Mode("decision-out-of-enum", "confidence", _results("decision", 7), MALFORMED, "confidence"),
    Mode("scores-reordered", "confidence", _reverse, MALFORMED, "confidence"),
    Mode("score-fields-dropped", "confidence", _drop_score_fields, MALFORMED, "confidence"),
    Mode("score-reply-replayed", "confidence", _replay, MALFORMED, "confidence"),
]


# -- the stack ---------------------------------------------------------------------------


def _settings(data_dir: Path, **overrides: Any) -> Settings:
    return load_settings(
        "tiny",
        data_dir=data_dir,
        server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
        entailment=overrides.pop("entailment", LEXICAL_CHECKER),
        confidence={"plain_threshold": 0.5},  # as `tribunal demo`: no certified one yet
        **overrides,
    )


@dataclass
class Stages:
    data_dir: Path
    proxy: TamperProxy
    address: str
    """The proxy's address: every stage the gateway dials."""
    signer: KbSigner
    """The KB writer's key."""


def _planted(kb: KnowledgeBase) -> dict[str, KbEntry]:
    """Bleach answers that must never be served: one whose document does not support it
    (FAILED), one without documents in a collection that does not serve such (NO_EVIDENCE),
    one checked by another checker version (stale), and one VERIFIED in another
    collection."""
    unrelated = Chunk("doc-0", "The incubation period of the virus is up to 14 days.")
    support = Chunk("doc-0", f"{BLEACH} The vet's guide says so for every breed of dog.")
    return {
        "failed": KbEntry("bleach-failed", BLEACH_QUERY, BLEACH, chunks=(unrelated,)),
        "no_evidence": KbEntry(
            "bleach-no-evidence", "Can I clean my dog with bleach against COVID-19?", BLEACH
        ),
        "stale": KbEntry(
            "bleach-stale",
            "Is bleach good for my dog's fur during COVID-19?",
            BLEACH,
            chunks=(support,),
        ),
        "verified": KbEntry("bleach-other", BLEACH_QUERY, BLEACH, chunks=(support,)),
    }


def write_signed_kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, KbSigner]:
    """The verified, signed KB with the planted entries, in a new data dir; the stages'
    settings and the writer's key (whose private file then leaves the data dir)."""
    data_dir = tmp_path_factory.mktemp("tamper")
    settings = _settings(data_dir)
    # The test is the KB's writer: it holds the signing key; the stage server never loads it.
    signer, created = writer_signer(settings)
    assert created
    assert (data_dir / "keys" / "kb-signing.key").stat().st_mode & 0o777 == 0o600
    kb = KnowledgeBase.from_settings(settings, signer=signer)
    try:
        entries = verified_faq_entries(FAQ, chunk_chars=settings.retrieval.chunk_size_chars)
        result = kb.upsert(COLLECTION, entries, create=True)
        assert result.verdicts["verified"] > 100, result
        planted = _planted(kb)
        assert kb.upsert(OTHER, [planted["verified"]], create=True).verdicts == {"verified": 1}
        written = kb.upsert(COLLECTION, [planted["failed"], planted["no_evidence"]])
        assert written.verdicts == {"failed": 1, "no_evidence": 1}, written
    finally:
        kb.close()
    # One more verified by another checker version (a laxer threshold): stale.
    stale = _settings(data_dir, entailment={**LEXICAL_CHECKER, "entail_threshold": 0.01})
    kb = KnowledgeBase.from_settings(stale, signer=signer)
    try:
        written = kb.upsert(COLLECTION, [planted["stale"]])
        assert written.verdicts == {"verified": 1}, written
    finally:
        kb.close()
    CAPTURED["checker_version"] = checker_version(settings)
    assert checker_version(stale) != CAPTURED["checker_version"]
    # Neither the stages nor the gateway need the private key: it leaves the data dir.
    private = data_dir / "keys" / "kb-signing.key"
    private.rename(tmp_path_factory.mktemp("writer") / private.name)
    return settings, signer


def capture_foreign(proxy: TamperProxy) -> None:
    """Another collection's signed reply, for the mode that splices it in."""
    CAPTURED["foreign"] = proxy.search_upstream(
        retrieval_pb2.SearchRequest(collection=OTHER, query=BLEACH_QUERY, top_k=1), timeout=120
    )
    assert CAPTURED["foreign"].hits[0].HasField("served")


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stages]:
    """The verified KB, the real stages on one server, the proxy in front of them."""
    settings, signer = write_signed_kb(tmp_path_factory)
    data_dir = settings.data_dir
    host = build_stage_host(settings, ("retrieval", "ensemble", "confidence"))
    port = host.start()
    proxy = TamperProxy(f"127.0.0.1:{port}")
    try:
        assert host.wait_until_ready(900), host.load_error
        capture_foreign(proxy)
        yield Stages(data_dir, proxy, proxy.start(), signer)
    finally:
        proxy.stop()
        host.stop(0)


@dataclass
class Gateway:
    stub: gateway_pb2_grpc.GatewayServiceStub
    db: Database
    proxy: TamperProxy

    def ask(self, query: str) -> gateway_pb2.AnswerResponse:
        return self.stub.Answer(gateway_pb2.AnswerRequest(query=query), timeout=600)


def _postgres_database() -> tuple[str, Any]:
    import psycopg

    name = f"tribunal_tamper_{uuid.uuid4().hex[:12]}"
    admin = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return f"postgresql://postgres@127.0.0.1:5432/{name}", drop


@pytest.fixture(
    scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
def gateway(
    request: pytest.FixtureRequest, stages: Stages, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Gateway]:
    """A gateway dialling every stage through the proxy, auditing to SQLite or PostgreSQL."""
    drop = None
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('audit')}/tribunal.db"
    else:
        url, drop = _postgres_database()
    settings = _settings(
        stages.data_dir,
        database_url=url,
        gateway={
            "discovery": "grpc",
            "collection": COLLECTION,
            "addresses": dict.fromkeys(
                ("retrieval", "ensemble", "entailment", "confidence", "debate"), stages.address
            ),
            "deadline_s": 600.0,
            "stage_timeout_s": dict.fromkeys(("retrieval", "ensemble", "confidence"), 300.0),
        },
    )
    host: ServiceHost = build_host(settings)
    port = host.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    db = Database(url)
    try:
        assert host.wait_until_ready(120), host.load_error
        yield Gateway(gateway_pb2_grpc.GatewayServiceStub(channel), db, stages.proxy)
    finally:
        stages.proxy.mode = None
        channel.close()
        host.stop(0)
        db.close()
        if drop is not None:
            drop()


# -- the tests ---------------------------------------------------------------------------


def test_untampered_replies_are_answered_and_refused_as_usual(
    gateway: Gateway, stages: Stages
) -> None:
    gateway.proxy.mode = None
    accepted = gateway.ask(PARAPHRASE)
    assert accepted.decision == common_pb2.DECISION_ACCEPT, accepted
    served = gateway.db.decision(accepted.audit_id).detail["served"]
    assert served["signed_by"] == stages.signer.key_id
    planted = gateway.ask(BLEACH_QUERY)  # retrieved first, never served: not servable
    assert BLEACH not in planted.answer
    assert not planted.kb_entry_id.startswith("bleach-")
    assert accepted.evidence_policy == "verified"
    assert accepted.answer_sha256 == answer_sha256(accepted.answer)
    assert [e.chunk_id for e in accepted.evidence], "a verified answer names its evidence"
    assert accepted.kb_version > 0
    refused = gateway.ask(OFF_TOPIC)
    assert refused.decision == common_pb2.DECISION_FALLBACK
    assert refused.fallback_reason == gateway_pb2.FALLBACK_REASON_LOW_CONFIDENCE


@pytest.mark.parametrize("mode", MODES, ids=[mode.name for mode in MODES])
def test_a_tampered_reply_falls_back_with_its_reason_and_an_audit_row(
    gateway: Gateway, mode: Mode
) -> None:
    query = mode.query or (OFF_TOPIC if mode.off_topic else PARAPHRASE)
    gateway.proxy.mode = None
    gateway.ask(query)  # an earlier request to replay
    gateway.proxy.mode = mode
    try:
        response = gateway.ask(query)
    finally:
        gateway.proxy.mode = None
    assert gateway.proxy.rewritten.get(mode.name), "the proxy rewrote nothing"
    if mode.name.startswith("not-servable-relabelled"):
        assert RELABELLED.get(mode.name), "no hit that may not be served was relabelled"
    assert response.decision == common_pb2.DECISION_FALLBACK, response
    reason = gateway_pb2.FallbackReason.Name(response.fallback_reason)
    assert (reason.removeprefix("FALLBACK_REASON_"), response.failed_stage) == (
        mode.reason,
        mode.failed_stage,
    )
    assert not response.kb_entry_id
    assert not response.evidence
    record = gateway.db.decision(response.audit_id)
    assert (record.decision, record.reason, record.failed_stage) == (
        "FALLBACK",
        mode.reason,
        mode.failed_stage,
    )


def test_an_entry_version_replayed_after_an_update_falls_back(
    gateway: Gateway, stages: Stages
) -> None:
    """The writer updates the served entry; a replica that later serves the version
    before the update (alone, or with the whole reply of then) is caught."""
    gateway.proxy.mode = None
    before = gateway.ask(PARAPHRASE)
    assert before.decision == common_pb2.DECISION_ACCEPT, before
    old_reply = gateway.proxy._previous["Search"]
    [old_hit] = [hit for hit in old_reply.hits if hit.entry.id == before.kb_entry_id]
    # The writer re-reviews the entry: same answer, new metadata, a new signed version.
    kb = KnowledgeBase.from_settings(_settings(stages.data_dir), signer=stages.signer)
    try:
        _, found = kb.collection(COLLECTION).verified_entries([before.kb_entry_id])
        entry, _ = found[before.kb_entry_id]
        reviewed = KbEntry(
            entry.id,
            entry.question,
            entry.answer,
            {**entry.metadata, "reviewed": uuid.uuid4().hex},
            entry.chunks,
        )
        assert kb.upsert(COLLECTION, [reviewed]).verdicts == {"verified": 1}
    finally:
        kb.close()
    after = gateway.ask(PARAPHRASE)
    assert (after.decision, after.kb_entry_id) == (common_pb2.DECISION_ACCEPT, entry.id), after
    assert after.kb_version > before.kb_version
    assert after.entry_sha256 == entry_sha256(reviewed) != before.entry_sha256

    def old_entry(request: Any, reply: Any, previous: Any) -> Any:
        for hit in reply.hits:
            if hit.entry.id == old_hit.entry.id:
                hit.entry.CopyFrom(old_hit.entry)
                hit.verification.CopyFrom(old_hit.verification)
                hit.served.CopyFrom(old_hit.served)
        return reply

    def old_reply_whole(request: Any, reply: Any, previous: Any) -> Any:
        replayed = type(reply)()
        replayed.CopyFrom(old_reply)
        replayed.request_id = reply.request_id
        return replayed

    for name, rewrite in (("old-entry", old_entry), ("old-reply", old_reply_whole)):
        gateway.proxy.mode = Mode(name, "retrieval", rewrite, MALFORMED, "retrieval")
        try:
            response = gateway.ask(PARAPHRASE)
        finally:
            gateway.proxy.mode = None
        assert response.decision == common_pb2.DECISION_FALLBACK, (name, response)
        assert (response.fallback_reason, response.failed_stage) == (
            gateway_pb2.FALLBACK_REASON_MALFORMED_RESPONSE,
            "retrieval",
        ), name
        error = gateway.db.decision(response.audit_id).error
        assert "older than version" in error, (name, error)
