"""Held-out evaluation of calibrator artifacts: calibration before/after and the guarantee.

For the rows an artifact never saw (its held-out split when the data file is
the one it was fitted on, every row otherwise) it reports ECE, AUROC, HMR,
accHMR and Brier of the raw score and of each calibrator, with bootstrap
intervals; for each α the threshold, the coverage it left on the risk split,
and the held-out hallucination rate and coverage; plain thresholding at 0.5
for comparison; and reliability diagrams.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from ..core import InvalidArgumentError, metrics
from ._data import LabelledSignals, split_rows
from ._features import signal_values
from ._threshold import acceptance_outcome

if TYPE_CHECKING:
    from ._artifact import CalibratorArtifact

__all__ = ["PLAIN_THRESHOLD", "calibration_metrics", "evaluate_artifacts", "markdown_report"]

PLAIN_THRESHOLD = 0.5
"""The fixed threshold plain thresholding is reported at."""

_METRICS = {
    "ece": metrics.expected_calibration_error,
    "auroc": metrics.auroc,
    "hmr": metrics.hmr,
    "acc_hmr": metrics.acc_hmr,
    "brier": metrics.brier,
}


def calibration_metrics(
    labels: NDArray[np.int64], confidence: NDArray[np.float64], *, n_resamples: int = 0
) -> dict[str, Any]:
    """ECE (10 bins), AUROC, HMR, accHMR, Brier; with ``n_resamples`` > 0 also a 95 %
    percentile-bootstrap interval for each (seed 0)."""
    out: dict[str, Any] = {"n": int(labels.size), "positives": int(labels.sum())}
    for name, metric in _METRICS.items():
        out[name] = float(metric(labels, confidence))
        if n_resamples:
            interval = metrics.bootstrap_ci(metric, labels, confidence, n_resamples=n_resamples)
            out[f"{name}_ci95"] = [interval.low, interval.high]
    return out


def _evaluation_rows(
    artifacts: Sequence[CalibratorArtifact], data: LabelledSignals
) -> tuple[NDArray[np.int64], str]:
    """Rows none of the artifacts was fitted or thresholded on, and what they are."""
    chosen: NDArray[np.int64] | None = None
    for artifact in artifacts:
        if artifact.training_data.get("sha256") != data.sha256:
            rows = np.arange(len(data))
        else:
            config = artifact.config
            rows = split_rows(
                data.labels,
                holdout_fraction=float(config["holdout_fraction"]),
                risk_fraction=float(config["risk_fraction"]),
                seed=int(config["seed"]),
            ).holdout
        if chosen is not None and not np.array_equal(chosen, rows):
            raise InvalidArgumentError(
                "these artifacts were split differently from this data; "
                "evaluate them one at a time",
                field="artifact",
            )
        chosen = rows
    assert chosen is not None
    same = artifacts[0].training_data.get("sha256") == data.sha256
    return chosen, "held-out" if same else "all"


def _raw_scores(data: LabelledSignals, score: str) -> tuple[NDArray[np.float64], int]:
    values = []
    for number, item in enumerate(data.signals):
        present = signal_values(item)
        if score not in present:
            raise InvalidArgumentError(
                f"raw score {score!r} is missing on row {number}", field="score"
            )
        values.append(present[score])
    raw = np.asarray(values)
    clipped = int(((raw < 0) | (raw > 1)).sum())
    return np.clip(raw, 0.0, 1.0), clipped


def _file_name(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name)


def evaluate_artifacts(
    artifacts: Sequence[CalibratorArtifact],
    data: LabelledSignals,
    out_dir: Path,
    *,
    raw_scores: Sequence[str] | None = None,
    n_resamples: int = 1000,
) -> dict[str, Any]:
    """Evaluate ``artifacts`` on ``data``; write reliability PNGs to ``out_dir``; return the report.

    ``raw_scores`` (default: the scores the artifacts were configured with) are
    the uncalibrated signals reported as "before"; values outside [0, 1] are
    clipped for the metrics and the report counts them.
    """
    if not artifacts:
        raise InvalidArgumentError("give at least one artifact", field="artifact")
    rows, part = _evaluation_rows(artifacts, data)
    evaluated = data.subset(rows)
    labels = evaluated.labels
    out_dir.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {
        "data": {
            "source": data.source,
            "sha256": data.sha256,
            "part": part,
            "rows": int(rows.size),
            "positives": int(labels.sum()),
        },
        "raw": [],
        "calibrators": [],
    }
    explicit = raw_scores is not None
    if raw_scores is None:
        configured = [a.calibrator.score_signal or a.config.get("score") for a in artifacts]
        raw_scores = list(dict.fromkeys(s for s in configured if s))
    for score in raw_scores:
        try:
            raw, clipped = _raw_scores(evaluated, score)
        except InvalidArgumentError:
            if explicit:
                raise
            # A default baseline the data does not carry (platt's configured score) is left out.
            report.setdefault("raw_missing", []).append(score)
            continue
        png = metrics.reliability_diagram(
            labels,
            raw,
            out_dir / f"reliability-raw-{_file_name(score)}.png",
            title=f"raw {score} ({part}, n={rows.size})",
        )
        report["raw"].append(
            {
                "score": score,
                "clipped_to_unit_interval": clipped,
                "metrics": calibration_metrics(labels, raw, n_resamples=n_resamples),
                "reliability_png": png.name,
            }
        )
    for artifact in artifacts:
        kind = artifact.calibrator.kind
        confidence = artifact.predict(evaluated.signals)
        png = metrics.reliability_diagram(
            labels,
            confidence,
            out_dir / f"reliability-{artifact.version}.png",
            title=f"{artifact.version} ({part}, n={rows.size})",
        )
        guarantee = []
        for threshold in artifact.thresholds:
            held_out = acceptance_outcome(confidence, labels, threshold.threshold)
            guarantee.append(
                {
                    "alpha": threshold.alpha,
                    "delta": threshold.delta,
                    "threshold": threshold.threshold,
                    "upper_bound": threshold.upper_bound,
                    "calibration_coverage": threshold.coverage,
                    "calibration_accepted": threshold.accepted,
                    "calibration_errors": threshold.errors,
                    "calibration_n": threshold.n,
                    "heldout": held_out.to_dict(),
                }
            )
        report["calibrators"].append(
            {
                "type": kind,
                "version": artifact.version,
                "score": artifact.calibrator.score_signal,
                "metrics": calibration_metrics(labels, confidence, n_resamples=n_resamples),
                "reliability_png": png.name,
                "risk_control": guarantee,
                "plain_threshold": acceptance_outcome(
                    confidence, labels, PLAIN_THRESHOLD
                ).to_dict(),
            }
        )
    return report


def _with_interval(values: dict[str, Any], name: str) -> str:
    value = values[name]
    if value is None or not np.isfinite(value):
        return "–"
    interval = values.get(f"{name}_ci95")
    return f"{value:.3f} [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else f"{value:.3f}"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _calibrator_label(calibrator: dict[str, Any]) -> str:
    on = f" on `{calibrator['score']}`" if calibrator["score"] else ""
    return f"{calibrator['type']}{on} (`{calibrator['version']}`)"


def markdown_report(report: dict[str, Any]) -> str:
    """The report as two markdown tables (calibration; the α guarantee)."""
    data = report["data"]
    lines = [
        f"Evaluated on the {data['part']} rows of `{Path(data['source']).name}` "
        f"(n = {data['rows']}, correct = {data['positives']}; sha256 {data['sha256'][:12]}). "
        "Intervals: 95 % bootstrap.",
        "",
        "| confidence | ECE | AUROC | HMR | accHMR | Brier |",
        "|---|---|---|---|---|---|",
    ]
    rows: list[tuple[str, dict[str, Any]]] = []
    for raw in report["raw"]:
        clipped = raw["clipped_to_unit_interval"]
        note = f", {clipped} clipped to [0, 1]" if clipped else ""
        rows.append((f"raw `{raw['score']}` (before{note})", raw["metrics"]))
    rows.extend((_calibrator_label(c), c["metrics"]) for c in report["calibrators"])
    for label, values in rows:
        cells = " | ".join(
            _with_interval(values, m) for m in ("ece", "auroc", "hmr", "acc_hmr", "brier")
        )
        lines.append(f"| {label} | {cells} |")
    lines += [
        "",
        "| calibrator | α | δ | threshold | coverage (risk split) | CP bound | held-out coverage "
        "| held-out hallucination rate (wrong / accepted) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for calibrator in report["calibrators"]:
        for item in calibrator["risk_control"]:
            held = item["heldout"]
            threshold = (
                "none qualifies" if item["threshold"] is None else f"{item['threshold']:.4f}"
            )
            lines.append(
                f"| {_calibrator_label(calibrator)} | {item['alpha']:g} | {item['delta']:g} "
                f"| {threshold} "
                f"| {item['calibration_coverage']:.3f} ({item['calibration_accepted']}/"
                f"{item['calibration_n']}) | {_share(item['upper_bound'])} "
                f"| {held['coverage']:.3f} ({held['accepted']}/{held['n']}) "
                f"| {_share(held['hallucination_rate'])} ({held['errors']}/{held['accepted']}) |"
            )
        plain = calibrator["plain_threshold"]
        lines.append(
            f"| {_calibrator_label(calibrator)}, plain threshold | – | – | {PLAIN_THRESHOLD} "
            "| – | – "
            f"| {plain['coverage']:.3f} ({plain['accepted']}/{plain['n']}) "
            f"| {_share(plain['hallucination_rate'])} ({plain['errors']}/{plain['accepted']}) |"
        )
    lines.extend(
        f"\nNot fitted: {skip['calibrator']} — {skip['reason']}"
        for skip in report.get("skipped", [])
    )
    return "\n".join(lines) + "\n"
