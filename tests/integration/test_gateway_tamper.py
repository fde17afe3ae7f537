"""The gateway decides; stages advise: replies rewritten in transit never produce an ACCEPT.

Real stage servers (retrieval over a verified COVID FAQ KB, the feature matcher,
the confidence service with the shipped calibrator at a plain 0.5 threshold)
sit behind a real gRPC proxy (``_tamper_proxy``) that rewrites their replies
the way a faulty network or an attacker would. Untampered, the paraphrase is
answered from the KB and the off-topic question falls back; under every mode
the gateway falls back with the right reason and stage, and writes the audit
row — on SQLite and on PostgreSQL.
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
from tribunal.gateway._wiring import build_stage_host
from tribunal.gateway.servicer import build_host
from tribunal.kb import answer_sha256
from tribunal.retrieval import KnowledgeBase
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


MODES = [
    # retrieval
    Mode("bm25-1e300", "retrieval", _set("sparse_score", 1e300), MALFORMED, "retrieval"),
    Mode("dense-nan", "retrieval", _set("dense_score", math.nan), MALFORMED, "retrieval"),
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
    Mode(
        "entries-unverified",
        "retrieval",
        _verdict(retrieval_pb2.VERIFICATION_VERDICT_UNVERIFIED),
        UNVERIFIED,
        "",
    ),
    Mode(
        "verification-contradicted",
        "retrieval",
        _verdict(retrieval_pb2.VERIFICATION_VERDICT_FAILED, "claim 1/1 is contradicted by doc-0"),
        UNVERIFIED,
        "",
    ),
    Mode("foreign-checker-version", "retrieval", _checker, UNVERIFIED, ""),
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
        entailment=LEXICAL_CHECKER,
        confidence={"plain_threshold": 0.5},  # as `tribunal demo`: no certified one yet
        **overrides,
    )


@dataclass
class Stages:
    data_dir: Path
    proxy: TamperProxy
    address: str
    """The proxy's address: every stage the gateway dials."""


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stages]:
    """The verified KB, the real stages on one server, the proxy in front of them."""
    data_dir = tmp_path_factory.mktemp("tamper")
    settings = _settings(data_dir)
    kb = KnowledgeBase.from_settings(settings)
    try:
        entries = verified_faq_entries(FAQ, chunk_chars=settings.retrieval.chunk_size_chars)
        result = kb.upsert(COLLECTION, entries, create=True)
        assert result.verdicts["verified"] > 100, result
    finally:
        kb.close()
    host = build_stage_host(settings, ("retrieval", "ensemble", "confidence"))
    port = host.start()
    proxy = TamperProxy(f"127.0.0.1:{port}")
    try:
        assert host.wait_until_ready(900), host.load_error
        yield Stages(data_dir, proxy, proxy.start())
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


def test_untampered_replies_are_answered_and_refused_as_usual(gateway: Gateway) -> None:
    gateway.proxy.mode = None
    accepted = gateway.ask(PARAPHRASE)
    assert accepted.decision == common_pb2.DECISION_ACCEPT, accepted
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
    gateway.proxy.mode = None
    gateway.ask(OFF_TOPIC if mode.off_topic else PARAPHRASE)  # an earlier request to replay
    gateway.proxy.mode = mode
    try:
        response = gateway.ask(OFF_TOPIC if mode.off_topic else PARAPHRASE)
    finally:
        gateway.proxy.mode = None
    assert gateway.proxy.rewritten.get(mode.name), "the proxy rewrote nothing"
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
