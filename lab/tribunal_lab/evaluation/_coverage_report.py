"""The markdown table of ``tribunal-lab eval coverage``, and how many labelled queries a
certificate would take."""

from __future__ import annotations

from typing import Any

__all__ = ["coverage_markdown", "queries_needed"]


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def coverage_markdown(report: dict[str, Any]) -> str:
    """One row per (condition, method, α): the certificate, then the test split."""
    lines = [
        f"### {report['domain']}: {report['traffic_queries']} traffic queries, "
        f"{report['test_queries']} test queries ({report['test_answerable']} answerable)",
        "",
        "| KB / matcher | calibration queries | method | α | certified bound | calibration "
        "coverage | test answered | test hallucination (wrong/answered) | test coverage "
        "(right/answerable) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for condition in report["conditions"]:
        label = condition["condition"]
        if "tune" in condition:
            metrics = condition["tune"]["metrics"]
            taught = metrics.get("teaching", {}).get("phrasings_added", 0)
            label += (
                f" (+{taught} phrasings taught, AUROC {metrics['before']['auroc']:.3f}"
                f"→{metrics['after']['auroc']:.3f}, "
                f"tune {condition['tune']['seconds']:.0f} s)"
            )
        if str(condition.get("retrieval_model", "")).startswith("tuned:"):
            label += ", retrieval with the tune"
        for row in condition["rows"]:
            test = row["test"]
            if row["certified"]:
                bound = f"{row['upper_bound']:.3f} (λ={row['threshold']:.3f})"
                coverage = f"{row['coverage']:.3f} ({row['accepted']}/{row['n']})"
                hallucination = (
                    f"{_share(test['hallucination'])} ({test['wrong']}/{test['answered']})"
                )
            else:
                bound, coverage, hallucination = "not certified", "0", "–"
            lines.append(
                f"| {label} | {condition['calibration_queries']} | {row['method']} | "
                f"{row['alpha']:g} | {bound} | {coverage} | {_share(test['answered_share'])} | "
                f"{hallucination} | {_share(test['coverage'])} |"
            )
    needed = report.get("needed") or {}
    if needed:
        lines += ["", "Labelled queries a certificate would take (estimate, see the docs):", ""]
        for key, value in needed.items():
            lines.append(f"- {key}: {value}")
    return "\n".join(lines) + "\n"


def queries_needed(report: dict[str, Any]) -> dict[str, Any]:
    """Per α with no certificate in the last condition: the labelled queries the first
    risk-control method would need (:func:`tribunal.confidence.queries_to_certify` on its
    certify split's curve, scaled to the whole traffic file, the tune's queries included).
    An estimate: the curve's rate is measured on the same queries."""
    from tribunal.confidence import queries_to_certify

    last = report["conditions"][-1]
    out: dict[str, Any] = {}
    for row in last["rows"]:
        if row["certified"] or row["method"] != last["rows"][0]["method"]:
            continue
        curve = row["risk_curve"]
        risk = row["calibration_split"]["risk"]
        accepted = [round(c * risk) for c in curve["coverage"]]
        errors = [round(h * a) for h, a in zip(curve["hallucination"], accepted, strict=True)]
        estimate = queries_to_certify(
            accepted,
            errors,
            certify_queries=risk,
            labelled_queries=report["traffic_queries"],
            alpha=row["alpha"],
            delta=row["delta"],
            method=row["method"],
        )
        key = f"{last['condition']}, {row['method']}, alpha={row['alpha']:g}"
        if estimate.labelled_needed is None:
            out[key] = "no point of the risk curve is below alpha"
        elif not estimate.more:
            # Enough at the best point's rate: the planned scan stopped before reaching it.
            out[key] = (
                f"~{estimate.certify_needed} certification queries (now {risk}) would do at "
                "the best threshold's rate, but the planned test sequence stopped before it "
                f"({estimate.errors} wrong of {estimate.accepted} accepted there); more "
                "labelled queries make that less likely"
            )
        else:
            out[key] = (
                f"~{estimate.certify_needed} certification queries (now {risk}), i.e. "
                f"~{estimate.labelled_needed} labelled queries in all (now "
                f"{report['traffic_queries']}; ~{estimate.more} more)"
            )
    return out
