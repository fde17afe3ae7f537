"""``Answer`` at concurrency 16 with one model for retrieval and matching against two,
side by side in one process, each against its own models' batched throughput.

Two gateways (real gRPC servers, ``in-process`` stages) on two copies of the demo's KB
(the COVID FAQ), each collection with a tune whose model is the feature matcher's
MPNet and whose head is the shipped regression — what ``tribunal tune
--encoder-epochs 0`` serves, without the minutes of fitting (speed depends on the
model's size, not its weights):

- **two models**: the collection searched with the profile's MiniLM, candidates matched
  by the tuned MPNet: each query goes through both models (the matcher's pass starts
  when retrieval embeds the query).
- **one model**: the same, after ``tribunal kb reembed --model tuned``: retrieval and
  the matcher share the tuned model, whose memory of recent texts hands the matcher the
  vector retrieval computed — one forward pass per query.

Rounds alternate (two, one, two, one, ...) after a warm-up that asks every query once
(a tuned model embeds an entry at its first match). Every round asks the same
paraphrases, each once, after the models' memories of recent texts are cleared, so no
round finds another's query vectors; and takes its own limit first: the path's models
embedding those queries alone in batches of 16 (the largest batch 16 clients can form),
the faster of one pass at a time over every core and single-threaded passes side by
side, one per core (as ``bench/gateway.py`` takes its limit), and again after it: a
share is against the mean of the two. Both paths fall back on
every answer (the shipped calibrator is not certified for these tunes), after the same
retrieval and matching.

    .venv/bin/python bench/one_pass.py [--rounds 3] [--concurrent-queries 160]
        [--out .build/bench/one_pass.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
from pathlib import Path
from typing import Any

from gateway import (
    SHARED,
    GatewayClient,
    _bench_settings,
    _concurrent,
    _embedder_limit,
    _paraphrases,
)
from tribunal.commands.demo import _ingest, _questions
from tribunal.core import Settings, model_path
from tribunal.embedding import shared_profile_embedder
from tribunal.embedding._batching import MicroBatchingEmbedder
from tribunal.ensemble import (
    FeatureEmbedder,
    MatchFeaturesArtifact,
    TunedMatcher,
    features_path,
    tuned_embedder,
    tuned_model_name,
    tuned_root,
)
from tribunal.retrieval import KnowledgeBase

PATHS = ("two models", "one model")


def _tune(settings: Settings, collection: str) -> tuple[TunedMatcher, str]:
    """A tune of ``collection`` (made once): the matcher's model and the shipped head."""
    head = MatchFeaturesArtifact.load(features_path(settings))
    name = f"{head.embedder.name}+tuned:{collection}"
    root = tuned_root(settings.data_dir, collection)
    if (root / "current").is_file():
        current = root / (root / "current").read_text().strip()
        return TunedMatcher.load(current), name
    staged = root / "staged"
    shutil.rmtree(staged, ignore_errors=True)
    shutil.copytree(model_path(settings, head.embedder.model_key), staged / "model")
    head.model_copy(update={"embedder": FeatureEmbedder(model_key="tuned", name=name)}).save(
        staged / "match-features.json"
    )
    sealed = TunedMatcher.seal(staged, {"binding": {"collection": collection}, "split": {}})
    final = staged.rename(root / sealed.version)
    (root / "current").write_text(sealed.version)
    return TunedMatcher.load(final), name


def _path_settings(base: Settings, collection: str) -> Settings:
    gateway = base.gateway.model_copy(update={"collection": collection})
    return base.model_copy(update={"gateway": gateway})


def _models(settings: Settings, path: str, tuned: TunedMatcher, name: str) -> list[Any]:
    """The shared embedders a path's queries go through, retrieval's first."""
    matcher = tuned_embedder(settings, tuned, name)
    return [matcher] if path == "one model" else [shared_profile_embedder(settings), matcher]


def _limit(settings: Settings, path: str, queries: list[str], size: int) -> dict[str, Any]:
    """The path's models embedding ``queries`` alone in batches of ``size``, the faster
    of one pass at a time and single-threaded passes side by side (fresh models: no
    memory; the tuned model is a copy of the matcher's)."""
    keys = [MatchFeaturesArtifact.load(features_path(settings)).embedder.model_key]
    if path == "two models":
        keys.insert(0, settings.roles.embedder)  # type: ignore[union-attr]
    return _embedder_limit(settings, queries, size, keys)


def _round(
    settings: Settings,
    path: str,
    client: GatewayClient,
    models: list[MicroBatchingEmbedder],
    *,
    queries: list[str],
    concurrency: int,
) -> dict[str, Any]:
    """One path's round: its limit, every query once at ``concurrency``, the limit
    again; the share against the mean of the two (the host's speed drifts)."""
    for model in models:
        model.forget_recent()
    first = _limit(settings, path, queries, concurrency)
    before = [(m.passes_, m.texts_) for m in models]
    result = _concurrent(client, queries, concurrency)
    last = _limit(settings, path, queries, concurrency)
    limit = (first["queries_per_s"] + last["queries_per_s"]) / 2
    measured = {"before": first, "after": last, "queries_per_s": limit}
    texts = sum(m.texts_ - b[1] for m, b in zip(models, before, strict=True))
    passes = sum(m.passes_ - b[0] for m, b in zip(models, before, strict=True))
    share = result["queries_per_s"] / limit
    print(
        f"  {path}: {result['queries_per_s']:.1f} queries/s, limit {limit:.1f} ({share:.0%}); "
        f"{texts / len(queries):.2f} texts per query",
        flush=True,
    )
    return {
        **result,
        "limit_queries_per_s": limit,
        "limit": measured,
        "share_of_limit": share,
        "texts_per_query": texts / len(queries),
        "passes": passes,
    }


def _table(rows: dict[str, list[dict[str, Any]]], concurrency: int, queries: int) -> None:
    print(f"\nconcurrency {concurrency}, {queries} paraphrases, each asked once a round:")
    print(
        "| path | queries/s | its limit | share of the limit, per round | model texts per "
        "query | texts per pass | p50 s | p99 s |\n|---|---|---|---|---|---|---|---|"
    )
    for path in PATHS:
        runs = rows[path]
        shares = " / ".join(f"{r['share_of_limit']:.0%}" for r in runs)
        texts = sum(r["texts_per_query"] * r["queries"] for r in runs)
        print(
            f"| {path} | {statistics.mean(r['queries_per_s'] for r in runs):.1f} | "
            f"{statistics.mean(r['limit_queries_per_s'] for r in runs):.1f} | {shares} | "
            f"{statistics.mean(r['texts_per_query'] for r in runs):.2f} | "
            f"{texts / max(1, sum(r['passes'] for r in runs)):.1f} | "
            f"{statistics.median(r['p50_s'] for r in runs):.3f} | "
            f"{max(r['p99_s'] for r in runs):.3f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each path (3)")
    parser.add_argument("--concurrent-queries", type=int, default=160)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/one_pass.json"))
    args = parser.parse_args()

    base = _bench_settings(args.concurrency)
    questions = {q for q, _ in _questions(args.data, 8, args.seed)}
    warm = _paraphrases(args.data, questions, 64, args.seed + 1)
    loaded = _paraphrases(args.data, questions | set(warm), args.concurrent_queries, args.seed + 2)
    clients: dict[str, GatewayClient] = {}
    models: dict[str, list[Any]] = {}
    for path, collection in zip(PATHS, ("covid-two-models", "covid-one-model"), strict=True):
        settings = _path_settings(base, collection)
        _ingest(settings, args.data, collection, match_vectors=False)
        tuned, name = _tune(settings, collection)
        kb = KnowledgeBase.from_settings(settings, checker=None)
        wanted = tuned_model_name(tuned.version) if path == "one model" else kb.embedder.name
        if kb.embedder_of(collection).name != wanted:
            kb.reembed(collection, wanted, progress=True)
        kb.close()
        clients[path] = GatewayClient(settings)
        models[path] = _models(settings, path, tuned, name)
    load_before = os.getloadavg()
    rows: dict[str, list[dict[str, Any]]] = {path: [] for path in PATHS}
    try:
        # The KB entries' vectors, as a running service has them: a tuned model's are
        # computed at an entry's first match, so every query is asked once beforehand (the
        # rounds then clear the models' memories of the queries themselves).
        for path in PATHS:
            _concurrent(clients[path], warm + loaded, args.concurrency)
        for number in range(1, args.rounds + 1):
            print(f"round {number}/{args.rounds}", flush=True)
            for path in PATHS:
                rows[path].append(
                    _round(
                        base,
                        path,
                        clients[path],
                        models[path],
                        queries=loaded,
                        concurrency=args.concurrency,
                    )
                )
    finally:
        for client in clients.values():
            client.close()
    load_after = os.getloadavg()
    _table(rows, args.concurrency, len(loaded))
    speedup = [
        one["queries_per_s"] / two["queries_per_s"]
        for two, one in zip(rows["two models"], rows["one model"], strict=True)
    ]
    print("one model / two models, queries/s per round: " + ", ".join(f"{s:.2f}x" for s in speedup))
    print(f"load average before {load_before}, after {load_after}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "rounds": rows,
                "speedup": speedup,
                "load_before": load_before,
                "load_after": load_after,
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
