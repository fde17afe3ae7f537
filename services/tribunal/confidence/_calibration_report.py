"""The calibration report: per-α table, hallucination vs coverage plot, reliability diagram."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ._artifact import json_ready
from ._calibrate import CalibrationResult
from ._certify_size import CertifyEstimate, not_certified_message

__all__ = ["calibration_markdown", "write_calibration_report"]


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def calibration_markdown(report: dict[str, Any]) -> str:
    """Per α: the certified threshold, its bound and coverage, and the held-out outcome."""
    traffic, config = report["traffic"], report["config"]
    split = traffic["split"]
    binding = report["artifact"]["binding"]
    lines = [
        f"Calibrator `{report['artifact']['version']}` ({config['calibrator']}, risk control "
        f"`{config['method']}`, δ = {config['delta']:g}) on `{traffic['source']}`: "
        f"{traffic['queries']} queries ({traffic['answerable']} answerable) in "
        f"{traffic['groups']} groups; fit {split['fit']}, certify {split['risk']}, "
        f"held out {split['holdout']} queries.",
        f"Bound to collection `{binding['collection']}` {binding['collection_version']} "
        f"({binding['entries']} entries), matcher `{binding['matcher']}`, embedder "
        f"`{binding['embedder']}`, profile `{binding['profile']}`.",
        "",
        "| α | threshold | certified bound | coverage (certify split) "
        "| held-out coverage | held-out hallucination (wrong / accepted) |",
        "|---|---|---|---|---|---|",
    ]
    for item in report["per_alpha"]:
        held = item["heldout"]
        if item["threshold"] is None:
            threshold, bound = "not certified", "–"
        else:
            threshold, bound = f"{item['threshold']:.4f}", f"{item['upper_bound']:.3f}"
        lines.append(
            f"| {item['alpha']:g} | {threshold} | {bound} "
            f"| {item['coverage']:.3f} ({item['accepted']}/{item['n']}) "
            f"| {held['coverage']:.3f} ({held['accepted']}/{held['n']}) "
            f"| {_share(held['hallucination_rate'])} ({held['errors']}/{held['accepted']}) |"
        )
    missing = [item for item in report["per_alpha"] if item["threshold"] is None]
    if missing:
        lines.append("")
        labelled = int(traffic.get("labelled_queries") or traffic["queries"])
        for item in missing:
            found = item.get("to_certify")
            estimate = (
                CertifyEstimate(**{k: v for k, v in found.items() if k != "more"})
                if found
                else None
            )
            lines.append(f"- {not_certified_message(item['alpha'], labelled, estimate)}.")
    metrics = report.get("heldout_metrics") or {}
    if metrics:
        lines += [
            "",
            f"Held-out decisions: AUROC {_share(metrics.get('auroc'))}, "
            f"ECE {_share(metrics.get('ece'))}, Brier {_share(metrics.get('brier'))} "
            f"(n = {metrics.get('n')}, right = {metrics.get('positives')}).",
        ]
    return "\n".join(lines) + "\n"


def _coverage_plot(report: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axis = plt.subplots(figsize=(6, 4.5))
    for name, style in (("heldout", "-"), ("risk", ":")):
        curve = report["curves"][name]
        label = "held-out" if name == "heldout" else "certify split"
        axis.plot(curve["coverage"], curve["hallucination"], style, label=label)
    for item in report["per_alpha"]:
        axis.axhline(item["alpha"], color="grey", linewidth=0.6, linestyle="--")
        held = item["heldout"]
        if item["threshold"] is not None and held["accepted"]:
            axis.plot(
                held["coverage"],
                held["hallucination_rate"],
                marker="o",
                linestyle="none",
                label=f"certified at α = {item['alpha']:g} (held-out)",
            )
    axis.set_xlabel("coverage (share of queries answered)")
    axis.set_ylabel("hallucination rate (wrong / answered)")
    axis.set_xlim(0, 1)
    axis.set_ylim(0, max(0.5, *(i["alpha"] * 1.5 for i in report["per_alpha"])))
    axis.set_title(f"{report['traffic']['source']}: hallucination vs coverage")
    axis.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_calibration_report(result: CalibrationResult, out_dir: Path) -> list[Path]:
    """Write ``calibration-report.json`` / ``.md`` and, with matplotlib installed,
    ``hallucination-coverage.png`` and ``reliability.png`` (held-out decisions)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    report = result.report
    written = [out_dir / "calibration-report.json", out_dir / "calibration-report.md"]
    written[0].write_text(json.dumps(json_ready(report), indent=2, allow_nan=False) + "\n")
    written[1].write_text(calibration_markdown(report))
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        report["plots"] = "skipped: matplotlib is not installed (pip install 'tribunal[analysis]')"
        return written
    from ..core import metrics

    written.append(_coverage_plot(report, out_dir / "hallucination-coverage.png"))
    if result.heldout_right.size:
        written.append(
            metrics.reliability_diagram(
                result.heldout_right,
                result.heldout_confidence,
                out_dir / "reliability.png",
                title=f"held-out decisions (n={result.heldout_right.size})",
            )
        )
    return written
