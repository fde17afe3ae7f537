"""A job sent to a running gateway (`--gateway`): BatchLabel over real gRPC, scripted stages.

The stages are the scripted servicers of the gateway fault tests (no models): the
ensemble answers a fixed P(match) and the debate a fixed outcome, so each cascade path
(judges sure, debate agreed, debate escalated to humans) is reached on demand, through
the real gateway, into the real store (SQLite and PostgreSQL).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from tribunal.core import load_settings
from tribunal.core.server import ServiceHost
from tribunal.core.storage import Database
from tribunal.gateway.servicer import build_host
from tribunal.jobs import GatewayLabeller, JobStore, LabelItem, export_job, run_job
from tribunal.v1 import debate_pb2

from tests.integration import _scripted_stages
from tests.integration._scripted_stages import Script

ITEMS = [
    LabelItem(item_id=f"q{i}:d{i}", query=f"question {i}?", chunk=f"passage {i}.",
              answers=(f"answer {i}",), query_id=f"q{i}", doc_id=f"d{i}",
              gold=None if i % 2 else 1)
    for i in range(5)
]  # fmt: skip


@pytest.fixture
def gateway(database_url: str) -> Iterator[tuple[str, Script]]:
    script = Script()
    stages = _scripted_stages.start(script)
    address = f"127.0.0.1:{stages.port}"
    settings = load_settings(
        "tiny",
        server={"port": 0, "metrics_port": None, "grace_seconds": 0.5},
        database_url=database_url,
        gateway={
            "discovery": "grpc",
            "addresses": dict.fromkeys(
                ("retrieval", "ensemble", "entailment", "confidence", "debate"), address
            ),
        },
    )
    host: ServiceHost = build_host(settings)
    port = host.start()
    assert host.wait_until_ready(20), host.load_error
    try:
        yield f"127.0.0.1:{port}", script
    finally:
        host.stop(0)
        stages.stop(0)


@pytest.mark.parametrize(
    "case",
    [
        (0.9, debate_pb2.DEBATE_OUTCOME_AGREED, 1, "JUDGES", ""),
        (0.5, debate_pb2.DEBATE_OUTCOME_AGREED, 1, "DEBATE", "AGREED"),
        (0.5, debate_pb2.DEBATE_OUTCOME_ESCALATED, None, "HUMAN_QUEUE", "ESCALATED"),
    ],
    ids=["judges-sure", "debate-agreed", "escalated"],
)
def test_cascade_through_a_running_gateway(
    gateway: tuple[str, Script],
    database_url: str,
    tmp_path: Path,
    case: tuple[float, int, int | None, str, str],
) -> None:
    p_match, outcome, label, source, debate = case
    address, script = gateway
    script.p_match, script.debate_outcome = p_match, outcome
    store = JobStore(Database(database_url))
    store.create_job("via-gw", mode="cascade", settings={}, source={})
    store.add_items("via-gw", ITEMS)
    labeller = GatewayLabeller(address, "cascade", timeout_s=60)
    try:
        report = run_job(
            store, "via-gw", labeller, mode="cascade", workers=2, batch_size=2, progress=False
        )
    finally:
        labeller.close()
    assert (report.labelled, report.remaining, dict(report.sources)) == (5, 0, {source: 5})
    # 50 prompt tokens per item from the relevance judge, 120 more where the debate ran.
    assert report.tokens == 5 * 50 + (0 if source == "JUDGES" else 5 * 120)
    entries = list(store.items("via-gw"))
    assert [e.item.item_id for e in entries] == [i.item_id for i in ITEMS]
    for entry in entries:
        result = entry.result
        assert result is not None
        assert (result.label, result.source, result.outcome) == (label, source, debate)
        assert result.p_relevant == pytest.approx(p_match)
        assert len(result.audit_id) == 32
        assert bool(result.escalation_id) == (source == "HUMAN_QUEUE")
    paths = {name: tmp_path / name for name in ("labels", "qrels", "holes", "escalations")}
    counts = export_job(store, "via-gw", **paths)
    if source == "HUMAN_QUEUE":
        assert (counts.qrels, counts.escalations) == (0, 5)
        queue = [json.loads(line) for line in paths["escalations"].read_text().splitlines()]
        assert [row["item_id"] for row in queue] == [i.item_id for i in ITEMS]
        # The gateway stored the debate with the escalation; the queue hands it on.
        assert all(row["history"]["outcome"] == "DEBATE_OUTCOME_ESCALATED" for row in queue)
        assert all(row["answers"] == [f"answer {i}"] for i, row in enumerate(queue))
    else:
        assert (counts.qrels, counts.holes, counts.escalations) == (5, 2, 0)
        assert paths["holes"].read_text() == "q1 0 d1 1\nq3 0 d3 1\n"
    assert store.job("via-gw").status == "done"
    store.close()
