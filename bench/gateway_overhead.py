"""The gateway's own work per ``Answer``: CPU milliseconds and queries/s at 16 clients when
no forward pass runs (every query's vectors already in the models' memories of recent
texts), so what is measured is everything else — gRPC, retrieval's FAISS and BM25
search and fusion, the stored entries, the reply checks, the matcher's features,
confidence, the audit write.

On a machine with few cores this work competes with the models for the same cores: each
millisecond of it is a millisecond the passes cannot use (``bench/gateway.py``).

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

import gateway as bench  # the gateway benchmark's server, settings and queries


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
            result = bench._without_passes(client, loaded, args.concurrency)
            rounds.append(result)
            print(
                f"  round {number}: {result['queries_per_s']:.1f} queries/s, "
                f"{result['cpu_ms_per_query']:.2f} CPU ms per query",
                flush=True,
            )
    finally:
        client.close()
    cpu = statistics.median(r["cpu_ms_per_query"] for r in rounds)
    rate = statistics.median(r["queries_per_s"] for r in rounds)
    print(
        f"\n{len(loaded)} queries at {args.concurrency} clients, no forward pass, "
        f"{args.rounds} rounds: median {cpu:.2f} CPU ms per query, {rate:.1f} queries/s"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps({"rounds": rounds, "cpu_ms_per_query": cpu, "queries_per_s": rate}, indent=2)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
