"""Live audits through the real gateway: the audit coin on each decision, reviews that move
the live bound, the fail-safe honoured on the next request, a new artifact ending it.

The gateway, its audit store, the review queue and the live monitor are real; the stages
are the scripted ones (tests/integration/_scripted_stages.py): the confidence service
scores P(match) = 0.9 with an identity calibrator at a plain threshold of 0.5, so every
answer is an ACCEPT until the collection's serving mode says otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import grpc
import pytest
from prometheus_client import REGISTRY
from tribunal.audit import AUDIT_REASON, StateStore, refresh_after_review
from tribunal.core import load_settings
from tribunal.core.storage import Database
from tribunal.gateway.servicer import build_host
from tribunal.jobs import ReviewQueue
from tribunal.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

from tests.integration import _scripted_stages
from tests.integration._scripted_stages import Script, identity_calibrator


class _Gateway:
    """Scripted stages and a real gateway trusting ``calibrator``, audited to ``url``."""

    def __init__(self, url: str, calibrator: Path, audit: Mapping[str, object]) -> None:
        self.script = Script(calibrator=calibrator)
        self.stages = _scripted_stages.start(self.script)
        address = f"127.0.0.1:{self.stages.port}"
        self.settings = load_settings(
            "tiny",
            server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
            database_url=url,
            confidence={**self.script.confidence_settings, "alpha": 0.05},
            audit=dict(audit),
            gateway={
                "discovery": "grpc",
                "addresses": dict.fromkeys(
                    ("retrieval", "ensemble", "entailment", "confidence", "debate"), address
                ),
                "kb_trusted_keys": self.script.trusted_keys,
            },
        )
        self.host = build_host(self.settings)
        port = self.host.start()
        assert self.host.wait_until_ready(20), self.host.load_error
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub = gateway_pb2_grpc.GatewayServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def ask(self, query: str = "how long is the incubation?") -> gateway_pb2.AnswerResponse:
        reply: gateway_pb2.AnswerResponse = self.stub.Answer(gateway_pb2.AnswerRequest(query=query))
        return reply

    def close(self) -> None:
        self.channel.close()
        self.host.stop(0)
        self.stages.stop(0)


def _review_all(db: Database, settings: object, label: str) -> int:
    """The open audit items, each voted ``label`` through the review queue and its hook."""
    queue = ReviewQueue(
        db,
        votes_per_item=1,
        on_vote=lambda item: refresh_after_review(db, settings, item),  # type: ignore[arg-type]
    )
    voted = 0
    while (item := queue.next_item("reviewer")) is not None:
        queue.vote("reviewer", item.token, label)
        voted += 1
    return voted


@pytest.mark.parametrize(
    ("mode", "decision"),
    [("fallback", common_pb2.DECISION_FALLBACK), ("escalate", common_pb2.DECISION_ESCALATE)],
)
def test_a_shown_violation_switches_the_collection_to_its_safe_mode(
    tmp_path: Path, mode: str, decision: int
) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    calibrator = identity_calibrator(tmp_path / "v1.json")
    gateway = _Gateway(url, calibrator, {"accept_share": 1.0, "safe_mode": mode})
    db = Database(url)
    try:
        first = gateway.ask()
        assert first.decision == common_pb2.DECISION_ACCEPT
        record = db.decision(first.audit_id)
        assert record.detail["audit"] == {
            "p": 1.0, "sampled": True, "stratum": "accept", "min_p": 1.0
        }  # fmt: skip
        items = db.escalations(status="open")
        assert [(i.reason, i.audit_id) for i in items] == [(AUDIT_REASON, first.audit_id)]
        assert items[0].history["question"] == "Does this entry answer the query?"
        # Reviewers find the first answers wrong: after 4 the bound's lower end passes 0.05.
        for _ in range(3):
            assert gateway.ask().decision == common_pb2.DECISION_ACCEPT
        assert _review_all(db, gateway.settings, "irrelevant") == 4
        state = StateStore(db).latest("default")
        assert state is not None
        assert (state.accepted, state.audited, state.wrong, state.mode) == (4, 4, 4, mode)
        assert state.lower > 0.05
        # The very next request is served in the safe mode, and says why.
        reply = gateway.ask()
        assert reply.decision == decision
        assert reply.fallback_reason == gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
        audited = db.decision(reply.audit_id)
        assert audited.detail["safe_mode"] == mode
        assert "safe mode" in audited.error
        assert (
            REGISTRY.get_sample_value(
                "tribunal_audit_safe_mode", {"collection": "default", "mode": mode}
            )
            == 1.0
        )
        assert REGISTRY.get_sample_value(
            "tribunal_audit_live_rate_lower", {"collection": "default"}
        ) == pytest.approx(state.lower)
        assert REGISTRY.get_sample_value("tribunal_audit_audited", {"collection": "default"}) == 4
    finally:
        gateway.close()

    # A new artifact (another calibrator version) ends the safe mode.
    renewed = identity_calibrator(tmp_path / "v2.json", note="re-certified")
    gateway = _Gateway(url, renewed, {"accept_share": 1.0, "safe_mode": mode})
    try:
        assert gateway.ask().decision == common_pb2.DECISION_ACCEPT
    finally:
        gateway.close()


def test_answers_reviewed_right_keep_the_collection_normal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    gateway = _Gateway(url, identity_calibrator(tmp_path / "v1.json"), {"accept_share": 1.0})
    db = Database(url)
    try:
        for _ in range(4):
            assert gateway.ask().decision == common_pb2.DECISION_ACCEPT
        assert _review_all(db, gateway.settings, "relevant") == 4
        state = StateStore(db).latest("default")
        assert state is not None
        assert (state.audited, state.wrong, state.lower, state.mode) == (4, 0, 0.0, "normal")
        assert gateway.ask().decision == common_pb2.DECISION_ACCEPT
    finally:
        gateway.close()


def test_the_stricter_mode_without_a_threshold_for_its_alpha_falls_back(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    audit = {"accept_share": 1.0, "safe_mode": "stricter", "safe_alpha": 0.01}
    gateway = _Gateway(url, identity_calibrator(tmp_path / "v1.json"), audit)
    db = Database(url)
    try:
        for _ in range(4):
            gateway.ask()
        _review_all(db, gateway.settings, "irrelevant")
        reply = gateway.ask()
        assert reply.decision == common_pb2.DECISION_FALLBACK
        assert reply.fallback_reason == gateway_pb2.FALLBACK_REASON_NO_CERTIFIED_THRESHOLD
        assert db.decision(reply.audit_id).detail["safe_mode"] == "stricter"
    finally:
        gateway.close()


def test_nothing_is_sampled_once_the_daily_budget_is_spent(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    audit = {"accept_share": 1.0, "daily_budget": 2}
    gateway = _Gateway(url, identity_calibrator(tmp_path / "v1.json"), audit)
    db = Database(url)
    try:
        replies = [gateway.ask() for _ in range(4)]
        draws = [db.decision(r.audit_id).detail["audit"] for r in replies]
        assert [d["sampled"] for d in draws] == [True, True, False, False]
        assert [d["p"] for d in draws] == [1.0, 1.0, 0.0, 0.0]
        assert draws[2]["stratum"] == "accept:budget_spent"
        assert len(db.escalations(status="open")) == 2
    finally:
        gateway.close()
