"""The markdown table of ``tribunal-lab eval entailment``: each row with its decision point."""

from __future__ import annotations

from typing import Any

from ._scoring import ci_text

__all__ = ["entailment_markdown"]


def entailment_markdown(report: dict[str, Any]) -> str:
    lines = [
        f"# Entailment cascade ({report['date']}, profile {report['profile']})",
        "",
        f"`{report['command']}`",
        "",
    ]
    for name, result in report["sets"].items():
        if result["selection_pairs"]:
            heading = (
                f"## {name}: selected on {result['selection_pairs']} pairs, reported on the "
                f"other {result['test_pairs']} ({result['positives_test']} entailed)"
            )
        else:
            heading = (
                f"## {name}: nothing selected; reported on all {result['test_pairs']} pairs "
                f"({result['positives_test']} entailed)"
            )
        lines += [
            heading,
            "",
            "| row | model | decision point applied | whose | bAcc [95% CI] | recall ent / not "
            "| AUROC [95% CI] | to stage 2 | s/pair |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row_name, row in result["rows"].items():
            lines.append(
                f"| {row_name} | {row['model']} | {row['threshold']['applied']} | "
                f"{row['threshold']['source']} | {ci_text(row['balanced_accuracy'])} | "
                f"{_recall(row['recall_positive'])} / {_recall(row['recall_negative'])} | "
                f"{ci_text(row['auroc'])} | {row['share_to_stage_2']:.1%} | "
                f"{row['seconds_per_pair']:.2f} |"
            )
        lines.append("")
    return "\n".join(lines)


def _recall(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}"
