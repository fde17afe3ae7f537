"""When a search query reaches the feature matcher's model: as it reaches retrieval's
(now) vs after retrieval's pass (before), at 16 clients, rounds in turn.

The gateway's in-process stages embed each query with two models — retrieval's and the
feature matcher's — one forward pass at a time in the process. Sent after retrieval's
pass, a query can miss the matcher's next pass and wait a whole cycle for the one after;
sent as it reaches retrieval, both models' next passes hold it. Each round clears the
models' memories of recent texts, takes its own limit (the two models alone on the same
queries, batches of 16) and asks every query once; the two orders alternate, so the
host's drift falls on both. The "before" order is the previous code of
``KnowledgeBase.embed_queries``, restored here for the comparison.

    .venv/bin/python bench/prefetch_order.py [--rounds 4] [--out .build/bench/prefetch_order.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

import gateway as bench  # the gateway benchmark's server, queries and rounds
from tribunal.embedding import Embedder, prefetch_query_vectors
from tribunal.retrieval import _knowledge_base

_NOW = _knowledge_base.KnowledgeBase.embed_queries


def _after_retrievals_pass(
    self: Any,
    texts: Sequence[str],
    embedder: Embedder | None = None,
    collections: Sequence[str] = (),
) -> NDArray[np.float32]:
    """The previous order: retrieval's pass first, then the matcher's model is sent the
    queries."""
    embedder = embedder or self.embedder
    vectors = embedder.embed(texts)
    by_collection: dict[str | None, list[str]] = {}
    for i, text in enumerate(texts):
        by_collection.setdefault(collections[i] if collections else None, []).append(text)
    for collection, some in by_collection.items():
        prefetch_query_vectors(some, besides=embedder, collection=collection)
    return vectors


ORDERS = {"as it reaches retrieval (now)": _NOW, "after retrieval's pass": _after_retrievals_pass}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/prefetch_order.json"))
    args = parser.parse_args()
    settings = bench.served_demo_kb(args.concurrency)
    asked = {q for q, _ in bench._questions(bench.SHARED, 8, 7)}
    warm = bench._paraphrases(bench.SHARED, asked, 64, 8)
    loaded = bench._paraphrases(bench.SHARED, asked | set(warm), 192, 9)
    client = bench.GatewayClient(settings)
    rows: dict[str, list[dict[str, Any]]] = {name: [] for name in ORDERS}
    try:
        bench._concurrent(client, warm, args.concurrency)
        for number in range(1, args.rounds + 1):
            for name, embed_queries in ORDERS.items():
                _knowledge_base.KnowledgeBase.embed_queries = embed_queries  # type: ignore[method-assign]
                print(f"round {number}, {name}:", flush=True)
                measured = bench._batched_round(
                    {name: (settings, client)}, loaded, args.concurrency, number=number
                )
                rows[name].append(measured[name])
    finally:
        _knowledge_base.KnowledgeBase.embed_queries = _NOW  # type: ignore[method-assign]
        client.close()
    print(f"\n{len(loaded)} paraphrases at {args.concurrency} clients, {args.rounds} rounds:")
    print("| order | share of the limit, per round | median | queries/s, mean | texts per pass |")
    print("|---|---|---|---|---|")
    for name, results in rows.items():
        shares = [r["share_of_limit"] for r in results]
        per_pass = [p["texts"] / max(1, p["passes"]) for r in results for p in r["passes"].values()]
        print(
            f"| {name} | {' / '.join(f'{s:.0%}' for s in shares)} | "
            f"{statistics.median(shares):.0%} | "
            f"{statistics.mean(r['queries_per_s'] for r in results):.1f} | "
            f"{min(per_pass):.1f}–{max(per_pass):.1f} |"
        )
    now, before = (rows[name] for name in ORDERS)
    wins = sum(a["share_of_limit"] > b["share_of_limit"] for a, b in zip(now, before, strict=True))
    print(f"now ahead of before in {wins} of {args.rounds} rounds")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
