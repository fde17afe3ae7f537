"""Feature matcher vs the six-judge LLM panel: time per pair, side by side in one run.

Both matchers of the tiny profile are loaded in this process (the domain objects the
ensemble service wraps, no gRPC) and match the same seeded COVID items of the
matching set (``tribunal-lab dataset matching --items-only`` builds it), one
``match`` call per pair as the gateway sends them with one candidate. The feature
matcher runs twice: cold (every entry new to its embedding cache) and with the entries'
texts cached (a service that has seen its KB). Reported: mean and p50 seconds per pair,
the ratios, and how often the feature matcher and the panel agree on ``match``.
Ratios, not absolute times: the machine is shared.

    .venv/bin/python bench/matcher.py [--pairs 8] [--out .build/bench/matcher.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path
from typing import Any

from tribunal.core import load_settings
from tribunal.ensemble import (
    EnsembleMatcher,
    FeatureMatcher,
    Matcher,
    MatchRequestItem,
    read_items,
)


def _time(matcher: Matcher, pairs: list[MatchRequestItem]) -> tuple[list[float], list[bool]]:
    matcher.match(pairs[:1])  # warm-up: first-call allocations, prefix caches
    seconds, decisions = [], []
    for pair in pairs:
        started = time.perf_counter()
        [result] = matcher.match([pair])
        seconds.append(time.perf_counter() - started)
        decisions.append(result.match)
    return seconds, decisions


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=8, help="COVID items to match")
    parser.add_argument("--dataset", type=Path, default=Path(".build/ensemble/dataset"))
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/matcher.json"))
    args = parser.parse_args()

    if not (args.dataset / "items.jsonl").is_file():
        print(f"no matching set at {args.dataset}: `tribunal-lab dataset matching --items-only`")
        return 0
    covid = [i for i in read_items(args.dataset) if i.source == "covid-qa"]
    chosen = random.Random(args.seed).sample(covid, min(args.pairs, len(covid)))
    pairs = [MatchRequestItem(i.query, i.candidate) for i in chosen]
    settings = load_settings("tiny")
    report: dict[str, Any] = {"pairs": len(pairs), "seed": args.seed}
    decisions: dict[str, list[bool]] = {}

    def warm_features() -> FeatureMatcher:
        # A long-running service has seen the KB's entries: their texts are cached.
        matcher = FeatureMatcher.from_settings(settings)
        entries = [p.candidate for p in pairs]
        matcher.embedder.embed(
            [e.question for e in entries]
            + [e.answer for e in entries]
            + [f"{e.question} {e.answer}" for e in entries]
        )
        return matcher

    for name, build in (
        ("features", lambda: FeatureMatcher.from_settings(settings)),
        ("features, entries cached", warm_features),
        ("judges", lambda: EnsembleMatcher.from_settings(settings)),
    ):
        matcher: Matcher = build()
        try:
            seconds, decisions[name] = _time(matcher, pairs)
        finally:
            matcher.close()
        report[name] = {
            "mean_s": statistics.fmean(seconds),
            "p50_s": statistics.median(seconds),
        }
    report["judges_over_features"] = report["judges"]["mean_s"] / report["features"]["mean_s"]
    report["judges_over_warm_features"] = (
        report["judges"]["mean_s"] / report["features, entries cached"]["mean_s"]
    )
    report["agreement"] = statistics.fmean(
        a == b for a, b in zip(decisions["features"], decisions["judges"], strict=True)
    )
    print("| matcher | mean s/pair | p50 s/pair |\n|---|---|---|")
    for name in ("features", "features, entries cached", "judges"):
        print(f"| {name} | {report[name]['mean_s']:.3f} | {report[name]['p50_s']:.3f} |")
    print(
        f"judges / features: {report['judges_over_features']:.1f}x cold, "
        f"{report['judges_over_warm_features']:.1f}x with the entries cached; "
        f"same match decision on {report['agreement']:.0%} of {len(pairs)} pairs"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
