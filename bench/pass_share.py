"""How much of the work in flight a spread pass takes: an even split over the lanes (now)
vs one more than the lanes (before: one pass per lane and one pass's worth kept
queued), at 16 clients, rounds in turn, each against the models' own batched
throughput.

The gateway of ``bench/gateway.py`` (a real gRPC server, in-process stages, the demo's
KB) twice in one process, each with its own models: the same settings, except that the
second keeps 4,097 recent texts instead of 4,096 — a difference no round can see
(every round asks 168 queries after clearing that memory) that gives it embedders of
its own, whose share is the previous code of ``MicroBatchingEmbedder._pass_share``,
restored here for the comparison. Each round takes the limit (the two models alone on
the same queries, batches of 16, the faster of one pass at a time and single-threaded
passes side by side) before and after the two gateways run, in alternating order, and
takes each share against the mean of the two.

    .venv/bin/python bench/pass_share.py [--rounds 6] [--out .build/bench/pass_share.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import types
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway as bench  # the gateway benchmark's server, queries and rounds
from tribunal.embedding import shared_profile_embedder
from tribunal.embedding._batching import MicroBatchingEmbedder


def _one_more_than_the_lanes(self: MicroBatchingEmbedder) -> int:
    """The share as the code before computed it."""
    if not self.spread or self._lanes is None:
        return self.max_batch_texts
    queued = sum(len(pending.texts) for pending in self._queue)
    self._in_flight_seen.append(queued + self._running_texts)
    return max(1, -(-max(self._in_flight_seen) // (self._lanes.lanes + 1)))


def _texts_per_pass(row: dict[str, Any]) -> str:
    return " / ".join(f"{p['texts'] / max(1, p['passes']):.1f}" for p in row["passes"].values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/pass_share.json"))
    args = parser.parse_args()
    settings = bench.served_demo_kb(args.concurrency)
    before = bench._variant(
        settings, shared_recent_texts=settings.retrieval.shared_recent_texts + 1
    )
    warm = bench._paraphrases(bench.SHARED, set(), 64, 8)
    loaded = bench._paraphrases(bench.SHARED, set(warm), 168, 9)
    variants = {
        "even_split": (settings, bench.GatewayClient(settings)),
        "one_more_than_the_lanes": (before, bench.GatewayClient(before)),
    }
    try:
        for _, client in variants.values():
            bench._concurrent(client, warm, args.concurrency)  # models loaded, KB vectors
        for key in bench._model_keys(before):
            model = shared_profile_embedder(before, key)
            assert model is not shared_profile_embedder(settings, key)
            model._pass_share = types.MethodType(_one_more_than_the_lanes, model)  # type: ignore[method-assign]
        rounds = [
            bench._batched_round(variants, loaded, args.concurrency, number=number)
            for number in range(args.rounds)
        ]
    finally:
        for _, client in variants.values():
            client.close()

    print(f"\n{len(loaded)} queries at {args.concurrency} clients, {args.rounds} rounds:")
    print(
        "| round | limit, queries/s (before / after) | even split: queries/s | share "
        "| cores busy | texts per pass | one more than the lanes: queries/s | share "
        "| cores busy | texts per pass | even / other |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for number, row in enumerate(rounds, start=1):
        even, other, limit = row["even_split"], row["one_more_than_the_lanes"], row["limit"]
        print(
            f"| {number} | {limit['queries_per_s']:.1f} ({limit['before']['queries_per_s']:.1f}"
            f" / {limit['after']['queries_per_s']:.1f}) | {even['queries_per_s']:.1f} | "
            f"{even['share_of_limit']:.0%} | {even['cpu_share']:.0%} | {_texts_per_pass(even)} | "
            f"{other['queries_per_s']:.1f} | {other['share_of_limit']:.0%} | "
            f"{other['cpu_share']:.0%} | {_texts_per_pass(other)} | "
            f"{even['queries_per_s'] / other['queries_per_s']:.2f}x |"
        )
    ratios = [
        r["even_split"]["queries_per_s"] / r["one_more_than_the_lanes"]["queries_per_s"]
        for r in rounds
    ]
    for name in variants:
        shares = [r[name]["share_of_limit"] for r in rounds]
        low, high = min(shares), max(shares)
        print(f"{name}: median share {statistics.median(shares):.0%} ({low:.0%}–{high:.0%})")
    print(
        f"even split / one more than the lanes: median {statistics.median(ratios):.2f}x, "
        f"more queries/s in {sum(r > 1 for r in ratios)} of {len(ratios)} rounds "
        "(texts per pass: retrieval's model / the matcher's)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rounds": rounds, "ratios": ratios}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
