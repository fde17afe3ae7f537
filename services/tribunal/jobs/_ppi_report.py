"""The evaluation's report: a markdown table, JSON, and a plot of every run's metrics.

The plot needs matplotlib (the ``analysis`` extra); the command says so and skips it
when matplotlib is missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._ppi import EvaluationEstimates, kendall_tau
from ._ppi_pool import MetricSpec

__all__ = ["estimates_markdown", "rankings", "write_estimates_plot"]


def rankings(estimates: EvaluationEstimates, metric: str) -> dict[str, dict[str, float]]:
    """Per estimator (ppi, judge_only, human_only): run → value of ``metric``."""
    out: dict[str, dict[str, float]] = {"judge_only": {}, "ppi": {}, "human_only": {}}
    for (run, name), value in estimates.judge_only.items():
        if name == metric:
            out["judge_only"][run] = value
    for (run, name), est in estimates.ppi.items():
        if name == metric:
            out["ppi"][run] = est.value
            out["human_only"][run] = estimates.human_only[(run, name)].value
    return out


def _interval(value: float, low: float, high: float) -> str:
    return f"{value:.3f} [{low:.3f}, {high:.3f}]"


def estimates_markdown(estimates: EvaluationEstimates, metrics: Sequence[MetricSpec]) -> str:
    level = f"{1 - estimates.alpha:.0%}"
    lines = [
        f"Human labels: {estimates.reviewed} of {estimates.drawn} sampled holes reviewed.",
        "",
    ]
    if not estimates.ready:
        lines += [
            "Intervals need at least 2 reviewed holes in every stratum of the sample; "
            "judge-only estimates so far:",
            "",
            "| run | " + " | ".join(spec.name for spec in metrics) + " |",
            "|---|" + "---|" * len(metrics),
        ]
        for run in sorted({run for run, _ in estimates.judge_only}):
            cells = [f"{estimates.judge_only[(run, spec.name)]:.3f}" for spec in metrics]
            lines.append(f"| {run} | " + " | ".join(cells) + " |")
        return "\n".join(lines) + "\n"
    lines += [
        f"| run | metric | judge + humans [{level} CI] | judge only | humans only "
        f"[{level} CI] | human labels a humans-only estimate needs for this width |",
        "|---|---|---|---|---|---|",
    ]
    for (run, name), est in estimates.ppi.items():
        human = estimates.human_only[(run, name)]
        lines.append(
            f"| {run} | {name} | **{_interval(est.value, est.low, est.high)}** | "
            f"{estimates.judge_only[(run, name)]:.3f} | "
            f"{_interval(human.value, human.low, human.high)} | "
            f"{estimates.human_equivalent[(run, name)]:,.0f} |"
        )
    lines += ["", f"| metric | A | B | A − B [{level} CI] | says |", "|---|---|---|---|---|"]
    for (name, a, b), diff in estimates.differences.items():
        if diff.low > 0:
            says = f"{a} beats {b}"
        elif diff.high < 0:
            says = f"{b} beats {a}"
        else:
            says = "no difference shown"
        lines.append(
            f"| {name} | {a} | {b} | {_interval(diff.value, diff.low, diff.high)} | {says} |"
        )
    lines += [
        "",
        "| metric | Kendall τ: judge+humans vs judge only | vs humans only |",
        "|---|---|---|",
    ]
    for spec in metrics:
        ranks = rankings(estimates, spec.name)
        lines.append(
            f"| {spec.name} | {kendall_tau(ranks['ppi'], ranks['judge_only']):.3f} | "
            f"{kendall_tau(ranks['ppi'], ranks['human_only']):.3f} |"
        )
    return "\n".join(lines) + "\n"


def write_estimates_plot(
    estimates: EvaluationEstimates, metrics: Sequence[MetricSpec], path: Path
) -> None:
    """One panel per metric: each run's judge+humans interval, beside the humans-only
    interval and the judge-only point."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = sorted({run for run, _ in estimates.judge_only})
    figure, axes = plt.subplots(
        1,
        len(metrics),
        figsize=(4.2 * len(metrics), 0.5 * len(runs) + 2.2),
        dpi=120,
        squeeze=False,
    )
    for axis, spec in zip(axes[0], metrics, strict=True):
        for row, run in enumerate(runs):
            key = (run, spec.name)
            if key in estimates.ppi:
                est, human = estimates.ppi[key], estimates.human_only[key]
                axis.errorbar(
                    [est.value],
                    [row + 0.12],
                    xerr=[[est.value - est.low], [est.high - est.value]],
                    fmt="o",
                    color="C0",
                    capsize=3,
                    label="judge + humans" if row == 0 else None,
                )
                axis.errorbar(
                    [human.value],
                    [row - 0.12],
                    xerr=[[human.value - human.low], [human.high - human.value]],
                    fmt="s",
                    color="C2",
                    capsize=3,
                    label="humans only" if row == 0 else None,
                )
            axis.plot(
                [estimates.judge_only[key]],
                [row],
                "x",
                color="C3",
                label="judge only" if row == 0 else None,
            )
        axis.set_yticks(range(len(runs)), runs)
        axis.set_xlabel(spec.name)
        axis.grid(axis="x", alpha=0.3)
    axes[0][0].legend(loc="best", fontsize=8)
    figure.suptitle(
        f"{1 - estimates.alpha:.0%} intervals; {estimates.reviewed} human labels", fontsize=10
    )
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)


def report_json(
    estimates: EvaluationEstimates, metrics: Sequence[MetricSpec], extra: dict[str, Any]
) -> dict[str, Any]:
    data = {**extra, **estimates.to_json()}
    if estimates.ready:
        data["kendall_tau"] = {
            spec.name: {
                "ppi_vs_judge_only": kendall_tau(*_pair(estimates, spec.name, "judge_only")),
                "ppi_vs_human_only": kendall_tau(*_pair(estimates, spec.name, "human_only")),
            }
            for spec in metrics
        }
    return data


def _pair(
    estimates: EvaluationEstimates, metric: str, other: str
) -> tuple[dict[str, float], dict[str, float]]:
    ranks = rankings(estimates, metric)
    return ranks["ppi"], ranks[other]
