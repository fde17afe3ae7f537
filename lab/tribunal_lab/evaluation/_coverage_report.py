"""The markdown table of ``tribunal-lab eval coverage``, and how many labelled queries a
certificate would take."""

from __future__ import annotations

from typing import Any

__all__ = ["coverage_markdown", "queries_needed", "required_risk_queries"]


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


def required_risk_queries(
    hallucination: float, coverage: float, alpha: float, delta: float, *, limit: int = 100_000
) -> int | None:
    """Fewest certification queries ``n`` at which accepting ``coverage·n`` of them with
    ``hallucination`` of those wrong gives a Clopper–Pearson upper bound ≤ α at 1 − δ
    (None: not below ``limit``, e.g. the observed rate is not below α)."""
    from tribunal.confidence import clopper_pearson_upper

    if hallucination >= alpha or coverage <= 0:
        return None
    n = 10
    while n <= limit:
        accepted = round(coverage * n)
        if (
            accepted
            and clopper_pearson_upper(round(hallucination * accepted), accepted, delta) <= alpha
        ):
            # Walk back to the first n that qualifies (the bound is not monotone in n
            # because of rounding; the first crossing is the answer).
            low = max(10, n // 2)
            for m in range(low, n + 1):
                a = round(coverage * m)
                if a and clopper_pearson_upper(round(hallucination * a), a, delta) <= alpha:
                    return m
            return n
        n *= 2
    return None


def queries_needed(report: dict[str, Any]) -> dict[str, Any]:
    """Per α with no certificate in the last condition: the labelled queries the first
    risk-control method would need, at the best point of its risk-split curve (the
    lowest requirement over thresholds whose observed rate is below α), scaled from the
    certification split to the whole traffic file. An estimate: the curve's rate is
    measured on the same queries, and the fixed-sequence methods pay a little more."""
    last = report["conditions"][-1]
    out: dict[str, Any] = {}
    for row in last["rows"]:
        if row["certified"] or row["method"] != last["rows"][0]["method"]:
            continue
        curve = row["risk_curve"]
        best: int | None = None
        for coverage, rate in zip(curve["coverage"], curve["hallucination"], strict=True):
            need = required_risk_queries(rate, coverage, row["alpha"], row["delta"])
            if need is not None and (best is None or need < best):
                best = need
        split = row["calibration_split"]
        risk = split["risk"]
        total = sum(split.values())
        file_share = risk / total * last["calibration_queries"] / report["traffic_queries"]
        key = f"{last['condition']}, {row['method']}, alpha={row['alpha']:g}"
        if best is None:
            out[key] = "no point of the risk curve is below alpha"
        else:
            queries = round(best / file_share)
            out[key] = (
                f"~{best} certification queries (now {risk}), i.e. ~{queries} labelled "
                f"queries in all (now {report['traffic_queries']}; "
                f"~{max(0, queries - report['traffic_queries'])} more)"
            )
    return out
