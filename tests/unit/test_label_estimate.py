"""``label run --estimate``: the projection per mode from measured sample costs."""

from __future__ import annotations

import pytest
from tribunal.commands._label_estimate import SampleCost, estimate_markdown, project
from tribunal.core import InvalidArgumentError


def test_each_mode_is_its_stages_cost_times_the_items() -> None:
    judge = SampleCost(items=5, seconds=0.4, tokens=0.0)
    debate = SampleCost(items=5, seconds=69.0, tokens=1845.0)
    by_mode = {
        e.mode: e
        for e in project(
            ["judge", "cascade", "debate"], 400, judge=judge, debate=debate, in_band=1, sampled=5
        )
    }
    assert by_mode["judge"].seconds == pytest.approx(160.0)
    assert by_mode["debate"].seconds == pytest.approx(27_600.0)
    assert by_mode["debate"].tokens == pytest.approx(738_000.0)
    cascade = by_mode["cascade"]
    # The judge on every item, the debate on the share in the band (1 of 5).
    assert cascade.seconds_per_item == pytest.approx(0.4 + 0.2 * 69.0)
    assert cascade.tokens_per_item == pytest.approx(0.2 * 1845.0)
    low, high = cascade.seconds_range or (0.0, 0.0)
    # 95% Clopper-Pearson of 1/5: 0.0051-0.7164; the range brackets the point.
    assert low == pytest.approx((0.4 + 0.0051 * 69.0) * 400, rel=1e-2)
    assert high == pytest.approx((0.4 + 0.7164 * 69.0) * 400, rel=1e-2)
    assert low < cascade.seconds < high
    text = estimate_markdown(list(by_mode.values()), sample=5, load_s=12.0)
    assert "| debate | 69.00 | 1845 | 400 | 7.7 h | 738,000 |" in text
    assert "1 of 5 sample items fell in the judge's band" in text


def test_a_mode_without_its_stage_costs_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="needs the sample cost"):
        project(["cascade"], 10, judge=SampleCost(1, 1.0, 0.0), debate=None)
