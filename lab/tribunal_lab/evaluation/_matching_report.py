"""The markdown tables of ``tribunal-lab eval matching-features`` (test-half figures)."""

from __future__ import annotations

import math
from typing import Any

__all__ = ["OPERATING_POINTS", "markdown_report"]

OPERATING_POINTS = ("max-accuracy", "risk", "empirical")


def _fmt(ci: dict[str, float]) -> str:
    if ci["value"] is None or not math.isfinite(ci["value"]):  # None: read back from JSON
        return "–"
    return f"{ci['value']:.3f} [{ci['low']:.3f}, {ci['high']:.3f}]"


def _rows(name: str, report: dict[str, Any]) -> list[str]:
    lines = []
    for point in OPERATING_POINTS:
        row = report[point]
        threshold = (
            "none (accept nothing)" if row["threshold"] is None else f"{row['threshold']:.3f}"
        )
        fpr = row["false_positive_rate"]
        fpr_text = "–" if fpr is None or not math.isfinite(fpr) else f"{fpr:.3f}"
        lines.append(
            f"| {name} | {point} | {threshold} | {_fmt(row['accuracy'])} | "
            f"{_fmt(row['hallucination'])} ({row['wrong']}/{row['accepted']}) | "
            f"{_fmt(row['coverage'])} | {fpr_text} | "
            f"{_fmt(report['auroc'])} |"
        )
    return lines


_HEADER = [
    "| scorer | operating point | threshold | accuracy [95% CI] | hallucination [95% CI] "
    "(wrong/accepted) | coverage [95% CI] | FPR | AUROC [95% CI] |",
    "|---|---|---|---|---|---|---|---|",
]


def markdown_report(result: dict[str, Any]) -> str:
    """The test-half tables: per scope overall, then per source."""
    split = result["split"]
    lines = [
        "# Matching with embedding features",
        "",
        f"Split seed {result['seed']}: selection {split['selection']['items']} items "
        f"({split['selection']['positives']} +), test {split['test']['items']} items "
        f"({split['test']['positives']} +); α = {result['alpha']}, δ = {result['delta']}, "
        f"{result['resamples']} bootstrap resamples. Figures on the test half. Features: "
        f"{result.get('feature_seconds_per_item', math.nan):.4f} s/item "
        f"({result.get('embedder')}).",
    ]
    for scope, rows in result["scopes"].items():
        lines += ["", f"## {scope}: overall", "", *_HEADER]
        for name, row in rows.items():
            lines += _rows(name, row["test"])
        lines += ["", f"## {scope}: per source", "", *_HEADER]
        for name, row in rows.items():
            for source, report in row["test_per_source"].items():
                lines += _rows(f"{name} — {source}", report)
    return "\n".join(lines) + "\n"
