"""Calibrators clamp inputs into what they were fitted on; they never extrapolate."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from tribunal.confidence import CalibratorArtifact, Signals
from tribunal.confidence._calibrators import PlattCalibrator

# The feature matcher's calibrator as shipped before `tribunal calibrate` (format /1,
# fitted before ranges were recorded), kept as a fixture of an artifact without ranges.
SHIPPED = Path(__file__).resolve().parent / "fixtures/legacy-platt-calibrator.json"


def _rows(n: int = 200, seed: int = 0) -> tuple[list[Signals], np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    rows = [
        Signals(
            sparse_score=float(rng.uniform(0, 10) + 5 * label),
            ensemble_p_match=float(np.clip(0.3 + 0.4 * label + rng.normal(0, 0.1), 0, 1)),
        )
        for label in labels
    ]
    return rows, labels


def test_a_fitted_space_records_its_ranges_and_clamps_into_them() -> None:
    rows, labels = _rows()
    calibrator = PlattCalibrator().fit(rows, labels)
    space = calibrator.space_
    assert space.lows is not None
    assert space.highs is not None
    top = space.highs[space.column("sparse_score")]
    raw = space.raw([Signals(sparse_score=1e300, ensemble_p_match=0.2)])
    assert raw[0, space.column("sparse_score")] == top
    huge, largest = calibrator.predict(
        [
            Signals(sparse_score=1e300, ensemble_p_match=0.2),
            Signals(sparse_score=top, ensemble_p_match=0.2),
        ]
    )
    assert huge == largest
    assert "lows" in space.to_dict()
    assert calibrator.state()["fit_rows"] == 200


def test_an_artifact_without_ranges_clamps_to_samuelsons_bound() -> None:
    artifact = CalibratorArtifact.load(SHIPPED)  # fitted before ranges were recorded
    assert artifact.version == "platt-2d9cc5ab5f08"  # its content, hence version, unchanged
    calibrator = artifact.calibrator
    assert isinstance(calibrator, PlattCalibrator)
    assert calibrator.space_.lows is None
    assert calibrator.fit_rows_hint_ == artifact.training_data["split"]["fit"]
    column = calibrator.space_.column("sparse_score")
    mean, scale = calibrator.mean_[column], calibrator.scale_[column]
    bound = mean + math.sqrt(calibrator.fit_rows_hint_ - 1) * scale
    base = {"retrieval_score": 2 / 61, "retrieval_rank": 1, "ensemble_p_match": 0.05}
    at_bound, beyond, absurd = artifact.predict(
        [Signals(**base, sparse_score=s) for s in (bound, 10 * bound, 1e300)]
    )
    assert at_bound == beyond == absurd
