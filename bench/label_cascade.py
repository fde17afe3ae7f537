"""Cascade vs debate on the same TREC DL 2019 items, composed from measured parts.

Inputs, both measured on the 300 pairs `tribunal eval debate` samples (seed 13):

- a ``judge``-mode labelling job (``tribunal label run --mode judge``): the ensemble's
  P(relevant), tokens and seconds for every item;
- the DREAM debates of ``tribunal eval debate`` (``results/debate/*.jsonl``): for each
  item it finished, the R = 3 debate, read at R = 2 by truncation.

The cascade is deterministic given those parts (judges decide outside the band
``(--low, --high)``, the debate inside it), so its labels and cost per item follow
without running the models again. Reported on the items that have both parts (and,
for the judges alone, on all judged items): balanced accuracy on non-escalated items,
escalation ratio (to humans), share routed to the debate, tokens and seconds per item.
Where the debate covers fewer items than the judges, the figures say so.

    .venv/bin/python bench/label_cascade.py --job dl19-300-judge \
        --database-url sqlite:///.build/labels.db [--low 0.2 --high 0.8]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tribunal.core.storage import Database
from tribunal.evaluation.metrics import balanced_accuracy
from tribunal.jobs import JobStore


def _debates(folder: Path, rounds: int) -> dict[str, dict[str, Any]]:
    """item id -> {label (1/0/None), tokens, seconds} of the R-round debate."""
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("debate-*-R3-*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            result = row["result"]
            kept = [r for r in result["rounds"] if r["number"] <= rounds]
            turns = [t for r in kept for t in r["turns"]]
            agreed = [r for r in kept if len({t["label"] for t in r["turns"]}) == 1]
            label = None
            if result.get("outcome") != "failed" and agreed:
                label = int(agreed[0]["turns"][0]["label"] == "relevant")
            out[row["key"]] = {
                "label": label,
                "tokens": sum(
                    t.get("usage", {}).get("prompt_tokens", 0)
                    + t.get("usage", {}).get("completion_tokens", 0)
                    for t in turns
                ),
                "seconds": sum(t.get("usage", {}).get("seconds", 0.0) for t in turns),
            }
    return out


def _summary(
    gold: list[int], labels: list[int | None], tokens: list[float], seconds: list[float]
) -> dict[str, Any]:
    kept = [(g, lab) for g, lab in zip(gold, labels, strict=True) if lab is not None]
    n = len(gold)
    return {
        "items": n,
        "non_escalated": len(kept),
        "bacc": balanced_accuracy([g for g, _ in kept], [lab for _, lab in kept]) if kept else None,
        "recall_relevant": _recall(kept, 1),
        "recall_irrelevant": _recall(kept, 0),
        "escalation": 1 - len(kept) / n if n else None,
        "tokens_per_item": sum(tokens) / n if n else None,
        "seconds_per_item": sum(seconds) / n if n else None,
    }


def _recall(pairs: list[tuple[int, int]], cls: int) -> float | None:
    wanted = [lab for g, lab in pairs if g == cls]
    return sum(lab == cls for lab in wanted) / len(wanted) if wanted else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--job", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--debates", type=Path, default=Path("results/debate"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--low", type=float, default=0.2)
    parser.add_argument("--high", type=float, default=0.8)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/label_cascade.json"))
    args = parser.parse_args()

    store = JobStore(Database(args.database_url))
    judged = {
        it.item.item_id: it
        for it in store.items(args.job, finished=True)
        if it.item.gold is not None
    }
    debates = _debates(args.debates, args.rounds)
    both = [key for key in judged if key in debates]

    def gold(key: str) -> int:
        grade = judged[key].item.gold
        assert grade is not None
        return int(grade >= 2)

    def judge_part(key: str) -> tuple[float, int, float]:
        result = judged[key].result
        assert result is not None
        assert result.p_relevant is not None
        return result.p_relevant, result.tokens, result.seconds

    report: dict[str, Any] = {"band": [args.low, args.high], "rounds": args.rounds}
    keys = sorted(judged)
    p = [judge_part(k)[0] for k in keys]
    report["judges alone, P >= 0.5 (all judged items)"] = _summary(
        [gold(k) for k in keys],
        [int(x >= 0.5) for x in p],
        [judge_part(k)[1] for k in keys],
        [judge_part(k)[2] for k in keys],
    )
    routed = [k for k in keys if args.low < judge_part(k)[0] < args.high]
    report["share routed to the debate (all judged items)"] = (
        len(routed) / len(keys) if keys else None
    )
    report["judge-decided part of the cascade (all judged items)"] = _summary(
        [gold(k) for k in keys],
        [None if k in routed else int(judge_part(k)[0] >= args.high) for k in keys],
        [judge_part(k)[1] for k in keys],
        [judge_part(k)[2] for k in keys],
    )
    both.sort()
    report["items with a debate"] = len(both)
    report[f"DREAM R = {args.rounds} (items with a debate)"] = _summary(
        [gold(k) for k in both],
        [debates[k]["label"] for k in both],
        [debates[k]["tokens"] for k in both],
        [debates[k]["seconds"] for k in both],
    )
    cascade_labels: list[int | None] = []
    cascade_tokens: list[float] = []
    cascade_seconds: list[float] = []
    for k in both:
        p_k, tokens, seconds = judge_part(k)
        if args.low < p_k < args.high:
            cascade_labels.append(debates[k]["label"])
            tokens += debates[k]["tokens"]
            seconds += debates[k]["seconds"]
        else:
            cascade_labels.append(int(p_k >= args.high))
        cascade_tokens.append(tokens)
        cascade_seconds.append(seconds)
    report["cascade (items with a debate)"] = _summary(
        [gold(k) for k in both], cascade_labels, cascade_tokens, cascade_seconds
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
