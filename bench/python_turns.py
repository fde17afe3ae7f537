"""CPU per search when several threads search at once: taking turns against plain threads.

A retrieval search on the demo's KB (the COVID FAQ), its query vector given (no model
runs), called by 1, 2 or 16 threads at once, each way in turn within every round: with
the search's CPU-bound sections taking turns (``tribunal.core.python_turn``, the
default) and with them running at once as plain threads. What is reported is the
process's CPU microseconds per search (every thread, user and system), the median over
the rounds, and each way's CPU against one thread's.

    .venv/bin/python bench/python_turns.py [--rounds 3] [--out .build/bench/python_turns.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import gateway as bench  # the gateway benchmark's settings, KB and queries
from tribunal.core import take_python_turns
from tribunal.retrieval import KnowledgeBase, SearchQuery

THREADS = (1, 2, 16)
WAYS = ("turns", "threads")


def _cpu_us_per_call(call: Callable[[int], object], calls: int, threads: int) -> float:
    """Process CPU µs per call of ``call(i)`` for every i, three times over, on ``threads``."""
    asked = list(range(calls)) * 3
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(call, range(threads)))  # the pool's threads started
        started = time.process_time()
        list(pool.map(call, asked))
        return (time.process_time() - started) / len(asked) * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--queries", type=int, default=168)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/python_turns.json"))
    args = parser.parse_args()
    settings = bench.served_demo_kb(16)
    texts = bench._paraphrases(bench.SHARED, set(), args.queries, 9)
    kb = KnowledgeBase.from_settings(settings)
    vectors = kb.embed_queries(texts, collections=[bench.COLLECTION] * len(texts))
    queries = [SearchQuery(bench.COLLECTION, text, settings.gateway.top_k) for text in texts]

    def search(i: int) -> object:
        return kb.search_batch([queries[i]], query_vectors=vectors[i : i + 1])

    results: dict[str, dict[int, list[float]]] = {w: {t: [] for t in THREADS} for w in WAYS}
    for number in range(1, args.rounds + 1):
        for threads in THREADS:
            for way in WAYS if number % 2 else WAYS[::-1]:
                previous = take_python_turns(way == "turns")
                try:
                    cpu = _cpu_us_per_call(search, len(queries), threads)
                finally:
                    take_python_turns(previous)
                results[way][threads].append(cpu)
                print(f"  round {number}, {threads} threads, {way}: {cpu:.0f} CPU µs per search")
    median = {w: {t: statistics.median(v) for t, v in by.items()} for w, by in results.items()}
    alone = median["turns"][1]
    print(
        "\n| threads searching at once | "
        + " | ".join(f"{way}: CPU µs per search | against one thread" for way in WAYS)
        + " |"
    )
    print("|---|" + "---|---|" * len(WAYS))
    for threads in THREADS:
        cells = " | ".join(
            f"{median[way][threads]:.0f} | {median[way][threads] / alone:.2f}×" for way in WAYS
        )
        print(f"| {threads} | {cells} |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"rounds": results, "median": median}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
