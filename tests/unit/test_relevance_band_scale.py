"""The relevance artifact records every band on one scale, the calibrated p_relevant.

A band named by the artifact's figures (``metrics.cascade.band``) must be the band the
judge applies; the shipped artifact satisfies it, and a figure on another scale is refused.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest
from tribunal.core import ConfigError
from tribunal.ensemble import RelevanceArtifact

SHIPPED = (
    Path(__file__).resolve().parents[2] / "services/tribunal/artifacts/tiny/relevance/artifact.json"
)


def _shipped() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(SHIPPED.read_text(encoding="utf-8"))
    return data


def test_the_shipped_artifact_names_one_band_on_the_p_relevant_scale() -> None:
    artifact = RelevanceArtifact.load(SHIPPED)
    figures = artifact.metrics["cascade"]["band"]
    assert (figures["low"], figures["high"]) == (artifact.band_low, artifact.band_high)
    # The band lies on the scale of p_relevant: an item at a band edge has exactly that
    # p_relevant when its cosine is the edge carried back through the regression.
    (coef,), intercept = artifact.coef, artifact.intercept
    for edge in (artifact.band_low, artifact.band_high):
        cosine = (math.log(edge / (1 - edge)) - intercept) / coef
        assert artifact.p_relevant([cosine]) == pytest.approx(edge, abs=1e-12)


def test_figures_on_another_scale_are_refused_saying_what_to_fix() -> None:
    data = _shipped()
    wrong = copy.deepcopy(data)
    # The judge's own scale ((1 + cos) / 2), as exports once wrote it.
    wrong["metrics"]["cascade"]["band"] = {"low": 0.786, "high": 0.815}
    with pytest.raises(ConfigError, match="p_relevant scale"):
        RelevanceArtifact.from_dict(wrong, source="test")
    malformed = copy.deepcopy(data)
    malformed["metrics"]["cascade"]["band"] = [0.4, 0.5]
    with pytest.raises(ConfigError, match=r"metrics\.cascade\.band must be"):
        RelevanceArtifact.from_dict(malformed, source="test")
    # Figures without a band, or without cascade figures, are fine.
    plain = copy.deepcopy(data)
    del plain["metrics"]["cascade"]
    assert RelevanceArtifact.from_dict(plain).band_low == data["band"]["low"]
