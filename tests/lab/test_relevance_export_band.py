"""A sweep's exported relevance judge records its band on the artifact's one scale."""

from __future__ import annotations

import numpy as np
from tribunal.ensemble import RelevanceArtifact
from tribunal_lab.evaluation import sweep
from tribunal_lab.evaluation._relevance_export import export_relevance
from tribunal_lab.evaluation._sweep_stats import Judge


def test_an_exported_single_judge_records_its_band_on_the_p_relevant_scale() -> None:
    rng = np.random.default_rng(5)
    y = (rng.random(200) < 0.4).astype(np.int64)
    cosine = np.clip(0.2 + 0.3 * y + rng.normal(0, 0.25, y.size), -1, 1)
    name = "embedder:cosine"
    judges = {
        name: Judge(
            name,
            "single",
            (name,),
            (cosine + 1) / 2,
            np.full(y.size, 0.01),
            np.zeros(y.size),
            transform="cosine",
        )
    }
    report = sweep.analyse(judges, y, task="relevance", seed=3, max_escalation=0.15)
    report.update(command="tribunal-lab eval sweep", task="relevance")
    exported = export_relevance(report, judges, name, labels=y, backend="transformers")
    assert exported["metrics"]["cascade"]["band"] == exported["band"]
    raw_band = next(r for r in report["judges"] if r["judge"] == name)["test"]["cascade"]["band"]
    assert raw_band != exported["band"]  # the sweep's own scale differs: it was carried over
    artifact = RelevanceArtifact.from_dict(exported)
    assert artifact.band_low <= artifact.band_high
