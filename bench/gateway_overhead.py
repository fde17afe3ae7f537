"""The gateway's own work per ``Answer``: CPU milliseconds and queries/s at 16 clients when
no forward pass runs (every query's vectors already in the models' memories of recent
texts), so what is measured is everything else — gRPC, retrieval's FAISS and BM25
search and fusion, the stored entries, the reply checks, the matcher's features,
confidence, the audit write.

On a machine with few cores this work competes with the models for the same cores: each
millisecond of it is a millisecond the passes cannot use (``bench/gateway.py``).

Each round asks every query twice, in alternating order: with the CPU-bound Python
sections taking turns (the default, ``tribunal.core.python_turn``) and with them running
at once as plain threads; the ratio is the turns' CPU over the plain threads', round by
round.

One process, the demo's KB (the COVID FAQ), a real gateway gRPC server with in-process
stages, as in ``bench/gateway.py``; the clients run in the same process, so their gRPC
work is counted too.

    .venv/bin/python bench/gateway_overhead.py [--rounds 5] [--queries 168]
        [--out .build/bench/gateway_overhead.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import gateway as bench  # the gateway benchmark's server, settings and queries
from tribunal.core import take_python_turns

WAYS = ("turns", "threads")


def _round(
    client: bench.GatewayClient, loaded: list[str], concurrency: int, number: int
) -> dict[str, Any]:
    """Both ways once, the first way alternating from round to round."""
    order = WAYS if number % 2 else WAYS[::-1]
    out: dict[str, Any] = {}
    for way in order:
        previous = take_python_turns(way == "turns")
        try:
            out[way] = bench._without_passes(client, loaded, concurrency)
        finally:
            take_python_turns(previous)
    out["cpu_ratio"] = out["turns"]["cpu_ms_per_query"] / out["threads"]["cpu_ms_per_query"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=168)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/gateway_overhead.json"))
    args = parser.parse_args()
    settings = bench.served_demo_kb(args.concurrency)
    loaded = bench._paraphrases(bench.SHARED, set(), args.queries, 9)
    client = bench.GatewayClient(settings)
    rounds = []
    try:
        bench._concurrent(client, loaded, args.concurrency)  # every vector into memory
        for number in range(1, args.rounds + 1):
            result = _round(client, loaded, args.concurrency, number)
            rounds.append(result)
            print(
                f"  round {number}: "
                + ", ".join(
                    f"{way} {result[way]['queries_per_s']:.1f} queries/s, "
                    f"{result[way]['cpu_ms_per_query']:.2f} CPU ms per query"
                    for way in WAYS
                )
                + f"; turns / threads {result['cpu_ratio']:.2f}",
                flush=True,
            )
    finally:
        client.close()
    summary = {
        way: {
            "cpu_ms_per_query": statistics.median(r[way]["cpu_ms_per_query"] for r in rounds),
            "queries_per_s": statistics.median(r[way]["queries_per_s"] for r in rounds),
        }
        for way in WAYS
    }
    ratios = [r["cpu_ratio"] for r in rounds]
    print(
        f"\n{len(loaded)} queries at {args.concurrency} clients, no forward pass, "
        f"{args.rounds} rounds, medians: "
        + "; ".join(
            f"{way} {summary[way]['cpu_ms_per_query']:.2f} CPU ms per query, "
            f"{summary[way]['queries_per_s']:.1f} queries/s"
            for way in WAYS
        )
        + f"; CPU turns / threads {min(ratios):.2f}–{max(ratios):.2f} "
        f"(median {statistics.median(ratios):.2f})"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rounds": rounds, **summary, "cpu_ratios": ratios}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
