"""Pure parts of the runners: Ray pool sizing, batching, the cost report."""

from __future__ import annotations

from collections import Counter

from tribunal.jobs import LabelItem
from tribunal.jobs._ray import pool_size
from tribunal.jobs._runner import RunReport, batched


def test_the_ray_pool_is_sized_by_gpus_unless_told() -> None:
    assert pool_size({"CPU": 16.0, "GPU": 4.0}, None) == (4, 1.0, 1.0)
    assert pool_size({"CPU": 16.0, "GPU": 4.0}, 8) == (8, 0.5, 1.0)
    assert pool_size({"CPU": 16.0, "GPU": 1.0}, 2) == (2, 0.5, 1.0)
    assert pool_size({"CPU": 2.0}, None) == (1, 0.0, 1.0)
    assert pool_size({"CPU": 2.0}, 4) == (4, 0.0, 0.5)


def test_batches_keep_order_and_size() -> None:
    items = [LabelItem(item_id=str(i), query="q", chunk="c") for i in range(5)]
    assert [[i.item_id for i in b] for b in batched(items, 2)] == [["0", "1"], ["2", "3"], ["4"]]


def test_the_cost_report() -> None:
    report = RunReport(
        job="j",
        mode="cascade",
        runner="local",
        workers=2,
        labelled=4,
        tokens=1000,
        wall_seconds=8.0,
        sources=Counter({"JUDGES": 3, "HUMAN_QUEUE": 1}),
    )
    data = report.to_json()
    assert (data["items_per_s"], data["escalation_ratio"], data["tokens_per_item"]) == (
        0.5,
        0.25,
        250.0,
    )
    assert "4 item(s) labelled in 8.0 s (0.5 items/s" in report.text()
    assert "escalation ratio 0.25" in report.text()
