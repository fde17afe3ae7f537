"""The report of ``tribunal-lab live-audit``: JSON, a markdown table and the bound's plot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["rates", "write_report"]

_LABELS = {
    "before": "before the shift",
    "shifted": "after the shift, until the trip",
    "safe_mode": "safe mode",
    "recertified": "after re-certification (served)",
    "safe_mode_again": "safe mode again (tripped after re-certification)",
}


def rates(stats: dict[str, Any]) -> dict[str, Any]:
    queries, accepted = stats["queries"], stats["accepted"]
    return {
        **stats,
        "coverage": round(accepted / queries, 4) if queries else None,
        "hallucination": round(stats["wrong"] / accepted, 4) if accepted else None,
        "labels_per_1000": round(1000 * stats["labels"] / queries, 1) if queries else None,
    }


def write_report(report: dict[str, Any], out: Path) -> list[Path]:
    """JSON, a markdown table and the bound's plot."""
    json_path = out / "live-audit.json"
    json_path.write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    lines = [
        "| segment | queries | accepted | coverage | wrong | live hallucination rate | "
        "out-of-scope accepted | reviewer labels | labels / 1,000 queries |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, s in report["segments"].items():
        lines.append(
            f"| {_LABELS.get(name, name)} | {s['queries']} | {s['accepted']} | "
            f"{s['coverage']} | {s['wrong']} | "
            f"{s['hallucination']} | {s['accepted_oos']} | {s['labels']} | "
            f"{s['labels_per_1000']} |"
        )
    for name, r in (report.get("recertified_by") or {}).items():
        lines.append(
            f"| same queries, {name} (counted, not served) | {r['queries']} | "
            f"{r['accepted']} | {r['coverage']} | {r['wrong']} | {r['hallucination']} | "
            f"{r['accepted_oos']} | — | — |"
        )
    lines += ["", "```json", json.dumps(report["events"], indent=2, sort_keys=True), "```"]
    lines += ["", f"`{report.get('command', '')}` ({report.get('date', '')})"]
    md_path = out / "live-audit.md"
    md_path.write_text("\n".join(lines) + "\n")
    written = [json_path, md_path]
    trace = [t for t in report["trace"] if t["audited"]]
    if trace:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axis = plt.subplots(figsize=(7, 3.5))
        for version in dict.fromkeys(t["calibrator"] for t in trace):
            points = [t for t in trace if t["calibrator"] == version]
            xs = [t["audited"] for t in points]
            axis.fill_between(
                xs, [t["lower"] for t in points], [t["upper"] for t in points], alpha=0.3,
                label=f"cumulative bound, {version}",
            )  # fmt: skip
            restarted = [t for t in points if t.get("restarts")]
            if restarted:
                axis.fill_between(
                    [t["audited"] for t in restarted],
                    [t["restart_lower"] for t in restarted],
                    [t["restart_upper"] for t in restarted],
                    alpha=0.3, hatch="//", label=f"restarted bound, {version}",
                )  # fmt: skip
        axis.axhline(report["settings"]["alpha"], color="red", linestyle="--", label="alpha")
        axis.set_xlabel("audited accepted answers (per calibrator)")
        axis.set_ylabel("hallucination rate")
        axis.set_ylim(0, 1)
        axis.legend(fontsize=7)
        figure.tight_layout()
        png = out / "live-audit.png"
        figure.savefig(png, dpi=120)
        plt.close(figure)
        written.append(png)
    return written
