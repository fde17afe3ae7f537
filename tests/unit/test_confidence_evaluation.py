"""Held-out evaluation: the right rows, figures equal to the metrics module's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tribunal.confidence import (
    FitConfig,
    evaluate_artifacts,
    fit_artifact,
    markdown_report,
    split_rows,
)
from tribunal.core import InvalidArgumentError, metrics

from tests.unit._confidence_data import synthetic_data


def test_evaluation_uses_the_held_out_rows_and_the_metrics_module(tmp_path: Path) -> None:
    data = synthetic_data(600)
    config = FitConfig(calibrator="platt", score="ensemble_p_match", alphas=(0.05, 0.1))
    platt = fit_artifact(data, config)
    isotonic = fit_artifact(data, FitConfig(calibrator="isotonic", score="dense_score"))
    report = evaluate_artifacts([platt, isotonic], data, tmp_path, n_resamples=20)

    holdout = split_rows(data.labels, holdout_fraction=0.3, risk_fraction=0.5, seed=0).holdout
    assert report["data"] == {
        "source": "synthetic",
        "sha256": "synthetic-600-0",
        "part": "held-out",
        "rows": holdout.size,
        "positives": int(data.labels[holdout].sum()),
    }
    held = data.subset(holdout)
    confidence = platt.predict(held.signals)
    figures = report["calibrators"][0]["metrics"]
    assert figures["ece"] == metrics.expected_calibration_error(held.labels, confidence)
    assert figures["hmr"] == metrics.hmr(held.labels, confidence)
    assert figures["acc_hmr"] == metrics.acc_hmr(held.labels, confidence)
    for row in report["calibrators"][0]["risk_control"]:
        accepted = (
            confidence >= row["threshold"] if row["threshold"] is not None else confidence < 0
        )
        assert row["heldout"]["accepted"] == int(accepted.sum())
        assert row["heldout"]["errors"] == int((accepted & (held.labels == 0)).sum())
    assert [r["score"] for r in report["raw"]] == ["ensemble_p_match", "dense_score"]
    raw = np.array([s.ensemble_p_match for s in held.signals])
    assert report["raw"][0]["metrics"]["auroc"] == metrics.auroc(held.labels, raw)
    table = markdown_report(report)
    assert table.count("| platt on") == 0
    assert "| isotonic on `dense_score`" in table
    assert (tmp_path / report["calibrators"][1]["reliability_png"]).is_file()


def test_other_data_is_evaluated_whole_and_absent_baselines_are_left_out(tmp_path: Path) -> None:
    platt = fit_artifact(synthetic_data(400), FitConfig(calibrator="platt", score="sparse_score"))
    other = synthetic_data(200, seed=4)
    report = evaluate_artifacts([platt], other, tmp_path, n_resamples=0)
    assert (report["data"]["part"], report["data"]["rows"]) == ("all", 200)
    assert report["raw"] == []
    assert report["raw_missing"] == ["sparse_score"]
    with pytest.raises(InvalidArgumentError, match="'sparse_score' is missing"):
        evaluate_artifacts([platt], other, tmp_path, raw_scores=["sparse_score"])
