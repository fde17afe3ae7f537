"""``tribunal confidence`` end to end on real signals: COVID-QA pairs through MiniLM
(written by the lab's ``tribunal-lab dataset question-similarity``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tribunal.cli import main
from tribunal.confidence import CalibratorArtifact, read_labelled_signals
from tribunal_lab.cli import main as lab_main

from tests.conftest import SHARED

SOURCE = SHARED / "data" / "covid-qa" / "question_similarity_en.jsonl"


@pytest.fixture(scope="module")
def signals_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("confidence") / "pairs.jsonl"
    code = lab_main(
        [
            "dataset",
            "question-similarity",
            "--source",
            str(SOURCE),
            "-o",
            str(out),
            "--limit-per-label",
            "80",
        ]
    )
    assert code == 0
    return out


@pytest.mark.models
def test_demo_signals_are_real_and_labelled(signals_file: Path) -> None:
    data = read_labelled_signals(signals_file)
    assert len(data) == 160
    assert int(data.labels.sum()) == 80
    first = data.signals[0]
    assert first.dense_score is not None
    assert -1.0 <= first.dense_score <= 1.0
    assert 0.0 <= first.extra["token_set_ratio"] <= 1.0
    assert first.ensemble_p_match is None  # not computed here: missing, not zero
    # Same-intent pairs are closer on average than different-intent ones.
    same = [s.dense_score for s, y in zip(data.signals, data.labels, strict=True) if y == 1]
    other = [s.dense_score for s, y in zip(data.signals, data.labels, strict=True) if y == 0]
    assert sum(same) / len(same) > sum(other) / len(other)  # type: ignore[arg-type]


@pytest.mark.models
def test_fit_then_evaluate_writes_artifact_and_report(
    signals_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    artifact_path = tmp_path / "platt.json"
    fit = [
        "confidence",
        "fit",
        "--data",
        str(signals_file),
        "--calibrator",
        "platt",
        "--score",
        "dense_score",
        "--alpha",
        "0.05",
        "0.1",
        "0.2",
        "--risk-fraction",
        "0.5",
        "-o",
        str(artifact_path),
    ]
    assert main(fit) == 0
    first = CalibratorArtifact.load(artifact_path)
    assert main(fit) == 0
    assert CalibratorArtifact.load(artifact_path).version == first.version  # deterministic
    assert first.alphas == (0.05, 0.1, 0.2)
    assert first.training_data["split"] == {"fit": 56, "risk": 56, "holdout": 48}

    out = tmp_path / "report"
    assert (
        main(
            [
                "confidence",
                "evaluate",
                "--artifact",
                str(artifact_path),
                "--data",
                str(signals_file),
                "--out",
                str(out),
                "--resamples",
                "50",
            ]
        )
        == 0
    )
    report = json.loads((out / "confidence-report.json").read_text())
    assert report["data"]["part"] == "held-out"
    assert report["data"]["rows"] == 48
    assert report["raw"][0]["score"] == "dense_score"
    (calibrator,) = report["calibrators"]
    assert calibrator["version"] == first.version
    assert [r["alpha"] for r in calibrator["risk_control"]] == [0.05, 0.1, 0.2]
    for row, threshold in zip(calibrator["risk_control"], first.thresholds, strict=True):
        assert row["threshold"] == threshold.threshold
        assert row["heldout"]["n"] == 48
        if threshold.threshold is None:
            assert row["heldout"]["accepted"] == 0
    for name in (calibrator["reliability_png"], report["raw"][0]["reliability_png"]):
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    table = (out / "confidence-report.md").read_text()
    assert "| raw `dense_score` (before" in table
    assert table in capsys.readouterr().out


@pytest.mark.models
def test_report_fits_every_calibrator_in_one_command(signals_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "all"
    code = main(
        [
            "confidence",
            "report",
            "--data",
            str(signals_file),
            "--score",
            "dense_score",
            "--calibrator",
            "platt",
            "isotonic",
            "temperature",
            "temperature:extra.token_set_ratio",
            "--out",
            str(out),
            "--resamples",
            "50",
        ]
    )
    assert code == 0
    report = json.loads((out / "confidence-report.json").read_text())
    kinds = [(c["type"], c["score"]) for c in report["calibrators"]]
    # Temperature scaling reads the logit of a probability: on dense_score it fits only
    # when every calibration row's cosine is in [0, 1] (held-out rows are clamped to the
    # fitted range); otherwise it is refused, and the report says why.
    fitted_on_dense = ("temperature", "dense_score") in kinds
    assert kinds == [
        ("platt", None),
        ("isotonic", "dense_score"),
        *([("temperature", "dense_score")] if fitted_on_dense else []),
        ("temperature", "extra.token_set_ratio"),
    ]
    if not fitted_on_dense:
        (skipped,) = report["skipped"]
        assert skipped["calibrator"] == "temperature"
        assert "logit of a probability" in skipped["reason"]
    else:
        assert report["skipped"] == []
    assert {r["score"] for r in report["raw"]} == {"dense_score", "extra.token_set_ratio"}
    for calibrator in report["calibrators"]:
        metrics = calibrator["metrics"]
        assert 0.0 <= metrics["ece"] <= 1.0
        assert 0.5 < metrics["auroc"] <= 1.0
        assert metrics["acc_hmr"] == pytest.approx(metrics["hmr"] * 24 / 48)
