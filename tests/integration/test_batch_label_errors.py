"""``BatchLabel``: an item that fails while it runs gets its own error; the others go on.

A real gateway over gRPC with scripted stages, writing its audit trail to a real
PostgreSQL, which cannot store a NUL character in text: that item's audit write fails,
and with it only that item (the stream used to end there). A job sent to the gateway
records the refused item as failed and labels the rest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from tribunal.jobs import GatewayLabeller, JobStore, LabelItem, run_job
from tribunal.v1 import common_pb2, gateway_pb2

from tests.integration.test_gateway_faults import Gateway, _gateway

pytestmark = pytest.mark.postgres


@pytest.fixture
def gw(postgres_url: str) -> Iterator[Gateway]:
    yield from _gateway(postgres_url, label_mode="judge")


def test_one_failing_item_does_not_end_the_stream(gw: Gateway) -> None:
    items = [
        gateway_pb2.LabelRequest(query=query, chunk=f"passage {i}", item_id=f"i{i}")
        for i, query in enumerate(["is it airborne?", "is it\x00 airborne?", "do masks help?"])
    ]
    replies = {
        reply.index: reply
        for reply in gw.stub.BatchLabel(gateway_pb2.BatchLabelRequest(items=items), timeout=20)
    }
    assert sorted(replies) == [0, 1, 2]
    assert replies[1].error_code == "UNAVAILABLE"
    assert "failed" in replies[1].error_message
    assert not replies[1].HasField("result")
    for index in (0, 2):
        assert replies[index].error_code == ""
        assert replies[index].result.item_id == f"i{index}"
        assert replies[index].result.label in (
            common_pb2.LABEL_RELEVANT,
            common_pb2.LABEL_IRRELEVANT,
        )
        assert gw.db.decision(replies[index].result.audit_id).kind == "label"


def test_a_job_records_a_refused_item_and_labels_the_rest(gw: Gateway) -> None:
    store = JobStore(gw.db)
    store.create_job("via-gateway", mode="judge", settings={}, source={})
    # The second item's answers break the gateway's limit (gateway.max_answers_per_item):
    # the gateway refuses the batch; the labeller retries one item at a time.
    store.add_items(
        "via-gateway",
        [
            LabelItem("a", "is it airborne?", "passage a"),
            LabelItem("b", "is it airborne?", "passage b", answers=("yes",) * 17),
            LabelItem("c", "do masks help?", "passage c"),
        ],
    )
    port = gw.host.port
    labeller = GatewayLabeller(f"127.0.0.1:{port}", "judge", timeout_s=30)
    try:
        report = run_job(store, "via-gateway", labeller, mode="judge", batch_size=3, progress=False)
    finally:
        labeller.close()
    assert (report.labelled, report.remaining, report.sources["FAILED"]) == (3, 0, 1)
    failed = {e.item.item_id: e.result for e in store.items("via-gateway") if e.result}
    assert failed["b"] is not None
    assert failed["b"].source == "FAILED"
    assert "gateway.max_answers_per_item" in failed["b"].error
    assert store.counts("via-gateway").failed == 1
    assert store.job("via-gateway").status == "done"
