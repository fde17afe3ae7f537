"""The figures and markdown of ``tribunal-lab eval debate``: classification on the
non-escalated items, escalation, cost, the adjudicator, the single judge and the swap."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

__all__ = [
    "adjudicated_summary",
    "debate_summary",
    "judge_summary",
    "markdown",
    "stance_holding",
    "swap_summary",
]

DREAM_PAPER = "DREAM (Llama-3.3-70B, R = 2, humans on escalations): bAcc 95.2% at 3.5% escalation"


def _labels(rows: Iterable[tuple[int, Any]]) -> tuple[np.ndarray, np.ndarray]:
    pairs = [(y, int(label.value == "relevant")) for y, label in rows]
    y = np.array([p[0] for p in pairs], dtype=np.int64)
    predicted = np.array([p[1] for p in pairs], dtype=np.int64)
    return y, predicted


def _classification(rows: list[tuple[int, Any]]) -> dict[str, Any]:
    from tribunal.core.metrics import balanced_accuracy, class_recalls

    if not rows:
        return {"n": 0}
    y, predicted = _labels(rows)
    recalls = class_recalls(y, predicted)
    return {
        "n": len(rows),
        "positives": int(y.sum()),
        "balanced_accuracy": balanced_accuracy(y, predicted),
        "recall_relevant": recalls.get(1, float("nan")),
        "recall_irrelevant": recalls.get(0, float("nan")),
        "predicted_relevant_share": float(predicted.mean()),
    }


def _cost(results: list[Any]) -> dict[str, float]:
    n = max(len(results), 1)
    return {
        "prompt_tokens_per_item": sum(r.usage.prompt_tokens for r in results) / n,
        "completion_tokens_per_item": sum(r.usage.completion_tokens for r in results) / n,
        "model_seconds_per_item": sum(r.usage.seconds for r in results) / n,
    }


def debate_summary(truth: dict[str, int], results: dict[str, Any], rounds: int) -> dict[str, Any]:
    from tribunal.debate import DebateOutcome

    cut = {key: r.truncated(rounds) for key, r in results.items()}
    n = max(len(cut), 1)
    agreed = [(truth[k], r.label) for k, r in cut.items() if r.outcome is DebateOutcome.AGREED]
    outcome_counts = {o.value: sum(r.outcome is o for r in cut.values()) for o in DebateOutcome}
    turns = [t for r in cut.values() for one in r.rounds for t in one.turns if t.label is not None]
    return {
        "max_rounds": rounds,
        "items": len(cut),
        "outcomes": outcome_counts,
        "escalation_ratio": outcome_counts["escalated"] / n,
        "failure_ratio": outcome_counts["failed"] / n,
        "agreed_in_round": {
            str(k): sum(
                r.outcome is DebateOutcome.AGREED and len(r.rounds) == k for r in cut.values()
            )
            for k in range(1, rounds + 1)
        },
        "non_escalated": _classification(agreed),
        "quote_found_share": float(np.mean([t.evidence_found for t in turns])) if turns else 0.0,
        **_cost(list(cut.values())),
    }


def adjudicated_summary(
    truth: dict[str, int], results: dict[str, Any], adjudications: dict[str, Any], rounds: int
) -> dict[str, Any]:
    from tribunal.debate import DebateOutcome

    rows: list[tuple[int, Any]] = []
    extra_tokens = extra_seconds = 0.0
    missing = failed = 0
    for key, result in results.items():
        cut = result.truncated(rounds)
        if cut.outcome is DebateOutcome.AGREED:
            rows.append((truth[key], cut.label))
        elif cut.outcome is DebateOutcome.ESCALATED:
            decision = adjudications.get(f"{key}@R{rounds}")
            if decision is None:
                missing += 1
                continue
            usage = decision["usage"]
            extra_tokens += usage["prompt_tokens"] + usage["completion_tokens"]
            extra_seconds += usage["seconds"]
            if decision["label"] is None:
                failed += 1
            else:
                from tribunal.debate import DebateLabel

                rows.append((truth[key], DebateLabel(decision["label"])))
        else:
            failed += 1
    n = max(len(results), 1)
    return {
        "max_rounds": rounds,
        "all_labelled": _classification(rows),
        "not_adjudicated_yet": missing,
        "failed": failed,
        "adjudicator_tokens_per_item": extra_tokens / n,
        "adjudicator_seconds_per_item": extra_seconds / n,
    }


def swap_summary(main: dict[str, Any], swapped: dict[str, Any], rounds: int) -> dict[str, Any]:
    from tribunal.debate import DebateOutcome

    keys = sorted(set(main) & set(swapped))
    if not keys:
        return {"items": 0}

    def final(result: Any) -> str:
        cut = result.truncated(rounds)
        return str(cut.label.value if cut.outcome is DebateOutcome.AGREED else cut.outcome.value)

    pairs = [(final(main[k]), final(swapped[k])) for k in keys]
    both_agreed = [p for p in pairs if p[0] in ("relevant", "irrelevant")]
    both_agreed = [p for p in both_agreed if p[1] in ("relevant", "irrelevant")]
    return {
        "items": len(keys),
        "changed_share": sum(a != b for a, b in pairs) / len(pairs),
        "both_agreed": len(both_agreed),
        "changed_among_both_agreed": sum(a != b for a, b in both_agreed) / max(len(both_agreed), 1),
        "relevant_to_irrelevant": sum(p == ("relevant", "irrelevant") for p in pairs),
        "irrelevant_to_relevant": sum(p == ("irrelevant", "relevant") for p in pairs),
    }


def stance_holding(results: dict[str, Any]) -> dict[str, float]:
    """Share of round-1 turns that kept the agent's assigned initial stance."""
    from tribunal.debate import AGENT_STANCES

    kept = {"A": [], "B": []}  # type: dict[str, list[bool]]
    for result in results.values():
        if result.rounds:
            for turn in result.rounds[0].turns:
                if turn.label is not None:
                    kept[turn.agent].append(turn.label is AGENT_STANCES[turn.agent])
    return {f"agent_{a}": float(np.mean(v)) if v else 0.0 for a, v in kept.items()}


def judge_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    from tribunal.debate import DebateLabel

    pairs = [
        (r["label"], DebateLabel.RELEVANT if r["p_yes"] >= 0.5 else DebateLabel.IRRELEVANT)
        for r in rows
    ]
    out = _classification(pairs)
    if rows:
        out["seconds_per_item"] = float(np.mean([r["seconds"] for r in rows]))
        out["prompt_tokens_per_item"] = float(np.mean([r["prompt_tokens"] for r in rows]))
    return out


# ----------------------------------------------------------------- report
def _pct(value: float) -> str:
    return "–" if math.isnan(value) else f"{100 * value:.1f}%"


def _metric(summary: dict[str, Any], name: str) -> str:
    return _pct(summary.get(name, float("nan")))


def markdown(report: dict[str, Any]) -> str:
    lines = [
        f"DREAM debate on TREC DL 2019 ({report['items']} pairs, seed {report['seed']}): "
        f"agents {report['models']['agents']}, adjudicator {report['models']['adjudicator']}, "
        f"{report['backend']} ({report['date']})",
        "",
        "| method | non-escalated n | bAcc | recall relevant | recall irrelevant | "
        "escalated | failed | tokens/item | model s/item |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, title in (("judge", ""), ("judge_on_debated_items", ", debated items only")):
        judge = report.get(name) or {}
        if not judge.get("n") or (name != "judge" and judge["n"] == report["judge"]["n"]):
            continue
        lines.append(
            f"| single judge (`relevance/yesno@1`, P(yes) ≥ 0.5{title}) | {judge['n']} | "
            f"{_pct(judge['balanced_accuracy'])} | {_pct(judge['recall_relevant'])} | "
            f"{_pct(judge['recall_irrelevant'])} | 0% | 0% | "
            f"{judge['prompt_tokens_per_item']:.0f} | {judge['seconds_per_item']:.2f} |"
        )
    for one in report.get("debate", []):
        c = one["non_escalated"]
        tokens = one["prompt_tokens_per_item"] + one["completion_tokens_per_item"]
        lines.append(
            f"| DREAM R = {one['max_rounds']} | {c['n']} | {_metric(c, 'balanced_accuracy')} | "
            f"{_metric(c, 'recall_relevant')} | {_metric(c, 'recall_irrelevant')} | "
            f"{_pct(one['escalation_ratio'])} | {_pct(one['failure_ratio'])} | {tokens:.0f} | "
            f"{one['model_seconds_per_item']:.2f} |"
        )
    for one in report.get("adjudicated", []):
        c = one["all_labelled"]
        base = next(d for d in report["debate"] if d["max_rounds"] == one["max_rounds"])
        tokens = (
            base["prompt_tokens_per_item"]
            + base["completion_tokens_per_item"]
            + one["adjudicator_tokens_per_item"]
        )
        seconds = base["model_seconds_per_item"] + one["adjudicator_seconds_per_item"]
        pending = (
            f" ({one['not_adjudicated_yet']} not yet adjudicated)"
            if one["not_adjudicated_yet"]
            else ""
        )
        lines.append(
            f"| DREAM R = {one['max_rounds']} + LLM adjudicator{pending} | {c['n']} | "
            f"{_metric(c, 'balanced_accuracy')} | {_metric(c, 'recall_relevant')} | "
            f"{_metric(c, 'recall_irrelevant')} | 0% | "
            f"{_pct(one['failed'] / max(report['items'], 1))} | {tokens:.0f} | {seconds:.2f} |"
        )
    lines += ["", f"Reference: {DREAM_PAPER}.", ""]
    for one in report.get("debate", []):
        lines.append(
            f"R = {one['max_rounds']}: outcomes {one['outcomes']}, agreed in round "
            f"{one['agreed_in_round']}, quotes found {_pct(one['quote_found_share'])}"
        )
    stance = report.get("stance_holding_round_1")
    if stance:
        lines.append(
            f"Round 1 kept the assigned stance: A (relevant) {_pct(stance['agent_A'])}, "
            f"B (irrelevant) {_pct(stance['agent_B'])}"
        )
    for one in report.get("swap", []):
        if one["items"]:
            lines.append(
                f"Stance-order swap, R = {one['max_rounds']}, {one['items']} items: final result "
                f"changed on {_pct(one['changed_share'])}; among {one['both_agreed']} agreed in "
                f"both, {_pct(one['changed_among_both_agreed'])} changed (relevant→irrelevant "
                f"{one['relevant_to_irrelevant']}, irrelevant→relevant "
                f"{one['irrelevant_to_relevant']})"
            )
    return "\n".join(lines) + "\n"
