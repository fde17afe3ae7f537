"""Evaluation metrics on cases whose answers are known by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from tribunal.core.metrics import (
    acc_hmr,
    auroc,
    balanced_accuracy,
    binary_report,
    bootstrap_ci,
    class_recalls,
    expected_calibration_error,
    hmr,
    reliability_diagram,
)


def test_hmr_all_correct_is_the_harmonic_mean_with_r_o_one() -> None:
    # R_O = 1 (no wrong answers), R_U = mean confidence = 0.6.
    assert hmr([1, 1], [0.4, 0.8]) == pytest.approx(2 * 1 * 0.6 / 1.6)


def test_hmr_all_wrong_with_zero_confidence_is_one() -> None:
    assert hmr([0, 0, 0], [0.0, 0.0, 0.0]) == 1.0


def test_hmr_constant_half_is_half() -> None:
    assert hmr([1, 0, 1, 0], [0.5] * 4) == pytest.approx(0.5)


def test_acc_hmr_multiplies_accuracy() -> None:
    assert acc_hmr([1, 0, 1, 0], [0.5] * 4) == pytest.approx(0.25)


def test_balanced_accuracy_and_class_recalls() -> None:
    truth = [1, 1, 1, 0]
    pred = [1, 1, 1, 1]  # says yes to everything
    assert class_recalls(truth, pred) == {0: 0.0, 1: 1.0}
    assert balanced_accuracy(truth, pred) == 0.5


def test_balanced_accuracy_is_scikit_learns_without_its_warnings() -> None:
    """Computed in numpy (a bootstrap calls it ~10⁴ times); same value as scikit-learn,
    also on one-class resamples, where scikit-learn warns and this stays quiet."""
    import warnings

    from sklearn.metrics import balanced_accuracy_score

    rng = np.random.default_rng(3)
    for size in (1, 5, 40):
        truth, pred = rng.integers(0, 2, size), rng.integers(0, 2, size)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            expected = balanced_accuracy_score(truth, pred)
        assert balanced_accuracy(truth, pred) == pytest.approx(expected)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert balanced_accuracy([1, 1, 1], [1, 0, 0]) == pytest.approx(1 / 3)
    assert math.isnan(balanced_accuracy([], []))
    with pytest.raises(ValueError, match="expected 2 predictions"):
        balanced_accuracy([1, 0], [1, 0, 1])


def test_ece_of_perfectly_calibrated_bins_is_zero_and_of_overconfidence_is_the_gap() -> None:
    assert expected_calibration_error([1, 0, 1, 0], [0.5] * 4) == pytest.approx(0.0)
    assert expected_calibration_error([0, 0, 0, 0], [0.9] * 4) == pytest.approx(0.9)
    # p = 1.0 falls in the last bin, not outside.
    assert expected_calibration_error([1], [1.0]) == pytest.approx(0.0)


def test_auroc_undefined_with_one_class() -> None:
    assert math.isnan(auroc([1, 1], [0.2, 0.9]))
    assert auroc([0, 1], [0.2, 0.9]) == 1.0


def test_binary_report_thresholds_at_the_given_value() -> None:
    report = binary_report([1, 0, 1, 0], [0.9, 0.6, 0.7, 0.1], threshold=0.65)
    assert report.accuracy == 1.0
    assert report.recall_negative == 1.0
    assert report.positives == 2


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="0 or 1"):
        balanced_accuracy([2, 0], [1, 0])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        expected_calibration_error([1, 0], [1.2, 0.1])
    with pytest.raises(ValueError, match="expected 2 probabilities"):
        auroc([1, 0], [0.5])


def test_bootstrap_is_deterministic_under_a_seed_and_brackets_the_estimate() -> None:
    rng = np.random.default_rng(1)
    truth = rng.integers(0, 2, 200)
    scores = np.clip(truth * 0.6 + rng.random(200) * 0.4, 0, 1)
    first = bootstrap_ci(auroc, truth, scores, n_resamples=200, seed=7)
    second = bootstrap_ci(auroc, truth, scores, n_resamples=200, seed=7)
    assert first == second
    assert first.low <= first.value <= first.high


def test_reliability_diagram_writes_a_png(tmp_path: Path) -> None:
    out = reliability_diagram([1, 0, 1, 1], [0.9, 0.2, 0.6, 0.8], tmp_path / "rel.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_hmr_is_zero_when_confidence_is_exactly_backwards() -> None:
    # Wrong answers at confidence 1 (R_O = 0), right ones at 0 (R_U = 0): both rewards vanish.
    assert hmr([0, 1], [1.0, 0.0]) == 0.0
    # All right at confidence 1: R_O = 1 by default, R_U = 1.
    assert hmr([1, 1], [1.0, 1.0]) == 1.0
    # All wrong at confidence 0 scores 1, but accHMR (accuracy 0) gives it nothing.
    assert acc_hmr([0, 0], [0.0, 0.0]) == 0.0
