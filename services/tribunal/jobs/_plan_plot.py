"""The trade-off plot of a label plan: automatic-label error against human share.

Needs matplotlib (the ``analysis`` extra); :func:`plot_available` says whether it is
installed so a command can skip the plot with a message instead of failing.
"""

from __future__ import annotations

from pathlib import Path

from ._plan_artifact import LabelPlan

__all__ = ["plot_available", "write_plan_plot"]


def plot_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        return False
    return True


def write_plan_plot(plan: LabelPlan, path: Path) -> None:
    """A PNG: observed error and its pointwise (1 − δ) bound for every nested band of the
    certification items, ε, the certified plan and the plain (uncertified) band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cert = plan.certification
    points = [p for p in plan.curve if p.error is not None]
    share = [p.human_share for p in points]
    figure, axes = plt.subplots(figsize=(6.4, 4.2), dpi=120)
    errors = [float("nan") if p.error is None else p.error for p in points]
    bounds = [float("nan") if p.upper_bound is None else p.upper_bound for p in points]
    axes.plot(share, errors, label="observed error (certification items)")
    axes.plot(
        share,
        bounds,
        linestyle="--",
        label=f"pointwise {1 - cert.delta:.0%} upper bound",
    )
    axes.axhline(cert.epsilon, color="grey", linewidth=0.8, label=f"ε = {cert.epsilon:g}")
    if plan.band is not None and cert.upper_bound is not None:
        axes.scatter(
            [cert.human_share],
            [cert.upper_bound],
            color="black",
            zorder=3,
            label=f"plan ({cert.method}, {cert.scheme}, clusters {cert.clusters}): "
            f"{cert.human_share:.1%} to humans",
        )
    if plan.plain_human_share is not None:
        axes.axvline(
            plan.plain_human_share,
            color="tab:red",
            linewidth=0.8,
            linestyle=":",
            label=f"plain band (observed error ≤ ε): {plan.plain_human_share:.1%}",
        )
    axes.set_xlabel("share of items sent to humans")
    axes.set_ylabel("error rate of automatic labels")
    axes.set_xlim(0.0, 1.0)
    axes.set_ylim(bottom=0.0)
    axes.set_title(
        f"{plan.version}: {cert.items} items, {cert.queries} queries (judge "
        f"{plan.judge.artifact_version})",
        fontsize=9,
    )
    axes.legend(fontsize=7, loc="lower left")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
