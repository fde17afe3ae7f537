"""``Answer``: the old path (entailment per query) vs the gateway now, at concurrency 1
and 16, against the embedder's own batched throughput on the same queries.

Everything runs in one process on the demo's KB (the COVID FAQ, self-evidenced):

- **old**: an entailment ``Check`` of each candidate's chunks against its answer per
  query, concurrently with the ensemble, then confidence — what the gateway did before
  evidence was verified when entries are written. Its own stage server (every stage).
- **new**: a real gateway gRPC server (``in-process`` discovery: its stages loaded in
  its process and called directly), called over gRPC: retrieval, the feature matcher,
  confidence, every reply checked, the decision audited. No entailment call; each query
  embedded once per model (the matcher's model gets it when retrieval embeds it);
  concurrent queries micro-batched through each embedder.
- **new, unbatched**: the same gateway with ``retrieval.micro_batch_texts: 1`` (one
  forward pass per call, the calls still queued on one thread per model), at
  concurrency 16: what micro-batching adds.
- **limit**: the same models' batched throughput on the same queries, alone (no gRPC,
  no cache), one model after the other, in batches of 16 — the largest batch 16 clients
  can form — a gateway can answer no faster than it embeds its queries. Also shown:
  batches of ``retrieval.micro_batch_texts`` (64), the models' ceiling at any concurrency.

At concurrency 1 the demo's questions alternate between the paths (old, new, old, ...)
after one warm-up each, and their decisions are compared. At concurrency 16 the
queries are other paraphrases from the same file, after a warm-up set that fills the
matcher's cache of KB entries as a running service's is. The host's speed drifts by
more than the effect within one run, so the batched gateway runs in ``--rounds``
rounds: each round clears the models' memories of recent texts (no query is served
from an earlier round), takes its own limit, then asks every query once; the median
round's share is the figure.

    .venv/bin/python bench/gateway.py [--queries 8] [--concurrent-queries 192]
        [--rounds 3] [--out .build/bench/gateway.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from tribunal.commands.demo import _in_process_settings, _ingest, _questions
from tribunal.core import Settings
from tribunal.embedding import load_profile_embedder, shared_profile_embedder
from tribunal.gateway import StageTransport, call_stage
from tribunal.gateway._candidates import candidate_signals
from tribunal.gateway._wiring import serve_stages
from tribunal.gateway.servicer import build_host
from tribunal.v1 import (
    common_pb2,
    confidence_pb2,
    ensemble_pb2,
    entailment_pb2,
    gateway_pb2,
    gateway_pb2_grpc,
    retrieval_pb2,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "covid-qa"
COLLECTION = "covid-bench"


class PerQueryEntailment:
    """The previous Answer path: entailment checked per query, concurrently with the
    ensemble; the confidence service's decision taken as is."""

    def __init__(self, settings: Settings, transport: StageTransport) -> None:
        self.settings = settings
        self.transport = transport
        self.pool = ThreadPoolExecutor(max_workers=2)

    def _call(self, stage: str, method: str, request: Any) -> Any:
        return call_stage(
            self.transport, stage, method, request, timeout_s=1800.0, retries=0, backoff_s=0.1
        )

    def answer(self, query: str) -> tuple[str, str]:
        """(decision, entry id) for one query."""
        found = self._call(
            "retrieval",
            "Search",
            retrieval_pb2.SearchRequest(
                collection=COLLECTION, query=query, top_k=self.settings.gateway.top_k
            ),
        )
        hits = list(found.hits)[: self.settings.gateway.candidates]
        if not hits:
            return "FALLBACK", ""
        limit = self.settings.entailment.max_hypothesis_chars
        pairs = [
            (i, chunk)
            for i, hit in enumerate(hits)
            if len(hit.entry.answer) <= limit
            for chunk in hit.entry.chunks
        ]
        matches = self.pool.submit(
            self._call,
            "ensemble",
            "BatchMatch",
            ensemble_pb2.BatchMatchRequest(
                items=[ensemble_pb2.MatchRequest(query=query, candidate=h.entry) for h in hits]
            ),
        )
        checks = self.pool.submit(
            self._call,
            "entailment",
            "Check",
            entailment_pb2.CheckRequest(
                pairs=[
                    entailment_pb2.EntailmentPair(premise=c.text, hypothesis=hits[i].entry.answer)
                    for i, c in pairs
                ]
            ),
        )
        matched, checked = matches.result(), checks.result() if pairs else None
        # The gateway's own signals (margins included), plus the per-query entailment.
        signals = candidate_signals(hits, list(matched.results))
        for i, item in enumerate(signals):
            results = (
                [r for (j, _), r in zip(pairs, checked.results, strict=True) if j == i]
                if checked
                else []
            )
            if results:
                item.entailment_p_entail = max(r.p_entail for r in results)
                item.supporting_passages = sum(
                    r.label == entailment_pb2.ENTAILMENT_LABEL_ENTAILED for r in results
                )
        scores = self._call(
            "confidence",
            "BatchScore",
            confidence_pb2.BatchScoreRequest(
                items=[confidence_pb2.ScoreRequest(signals=s) for s in signals]
            ),
        ).results
        best = max(range(len(hits)), key=lambda k: scores[k].confidence)
        decision = common_pb2.Decision.Name(scores[best].decision).removeprefix("DECISION_")
        return decision, hits[best].entry.id if decision == "ACCEPT" else ""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _paraphrases(folder: Path, exclude: set[str], count: int, seed: int) -> list[str]:
    """``count`` distinct user questions of the paraphrase file, none in ``exclude``."""
    rows = [
        json.loads(line)
        for line in (folder / "question_similarity_en.jsonl").read_text().splitlines()
        if line.strip()
    ]
    questions = sorted({r["question_2"] for r in rows if int(r["label"]) == 1} - exclude)
    return random.Random(seed).sample(questions, min(count, len(questions)))


class GatewayClient:
    """A real gateway gRPC server (in-process stages) and a channel to it."""

    def __init__(self, settings: Settings) -> None:
        self.host = build_host(settings)
        port = self.host.start()
        if not self.host.wait_until_ready():
            self.host.stop(0)
            raise RuntimeError(f"the gateway did not start: {self.host.load_error}")
        self.channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        self.stub: Any = gateway_pb2_grpc.GatewayServiceStub(self.channel)  # type: ignore[no-untyped-call]

    def answer(self, query: str) -> tuple[str, str]:
        reply = self.stub.Answer(gateway_pb2.AnswerRequest(query=query), timeout=3600)
        return common_pb2.Decision.Name(reply.decision).removeprefix("DECISION_"), reply.kb_entry_id

    def close(self) -> None:
        self.channel.close()
        self.host.stop(0)


def _concurrent(client: GatewayClient, queries: list[str], concurrency: int) -> dict[str, Any]:
    """Every query once, ``concurrency`` in flight: queries/s and latency percentiles."""
    seconds: list[float] = []

    def ask(query: str) -> str:
        started = time.perf_counter()
        decision, _ = client.answer(query)
        seconds.append(time.perf_counter() - started)
        return decision

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        decisions = list(pool.map(ask, queries))
    wall = time.perf_counter() - started
    return {
        "queries": len(queries),
        "seconds": wall,
        "queries_per_s": len(queries) / wall,
        "p50_s": _percentile(seconds, 0.5),
        "p99_s": _percentile(seconds, 0.99),
        "accepted": decisions.count("ACCEPT"),
    }


def _process_cpu_s() -> float:
    """User and system CPU seconds of this process (every thread) so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _model_keys(settings: Settings) -> list[str]:
    """The hot path's models: retrieval's embedder, then the feature matcher's."""
    from tribunal.ensemble import MatchFeaturesArtifact, features_path

    keys = [settings.roles.embedder]  # type: ignore[union-attr]
    matcher_key = MatchFeaturesArtifact.load(features_path(settings)).embedder.model_key
    if matcher_key not in keys:
        keys.append(matcher_key)
    return keys


def _passes(settings: Settings) -> dict[str, tuple[int, int, float]]:
    """(passes, texts, seconds in passes) so far of this process's shared embedder of
    each hot-path model: the ones the gateway's stages use."""
    out = {}
    for key in _model_keys(settings):
        model = shared_profile_embedder(settings, key)
        out[key] = (model.passes_, model.texts_, model.busy_s_)
    return out


def _embedder_limit(settings: Settings, queries: list[str], size: int) -> dict[str, Any]:
    """The hot path's models (retrieval's embedder, the feature matcher's) embedding the
    queries alone, one model after the other, in batches of ``size``: queries/s (fresh
    models, no cache)."""
    per_model = {}
    for key in _model_keys(settings):
        embedder = load_profile_embedder(settings, key)
        embedder.embed(queries[:size])  # warm-up
        started = time.perf_counter()
        for start in range(0, len(queries), size):
            embedder.embed(queries[start : start + size])
        per_model[key] = time.perf_counter() - started
    return {
        "models": per_model,
        "queries_per_s": len(queries) / sum(per_model.values()),
    }


def _bench_settings(concurrency: int) -> Settings:
    settings = _in_process_settings(None, None)
    # Time is what is measured: no stage may time out into a fallback.
    gateway = settings.gateway.model_copy(
        update={
            "collection": COLLECTION,
            "deadline_s": 3600.0,
            "stage_timeout_s": dict.fromkeys(settings.gateway.stage_timeout_s, 1800.0),
        }
    )
    # Room for every concurrent client at the gateway (its default admits 8 at work and 8
    # waiting, and refuses the rest at once).
    server = settings.server.model_copy(
        update={"max_ongoing_requests": 2 * concurrency, "max_queued_requests": 32}
    )
    return settings.model_copy(update={"gateway": gateway, "server": server})


def _variant(settings: Settings, **retrieval: Any) -> Settings:
    return settings.model_copy(
        update={"retrieval": settings.retrieval.model_copy(update=retrieval)}
    )


def _sequential(
    settings: Settings, new: GatewayClient, questions: list[tuple[str, str | None]]
) -> list[dict[str, Any]]:
    """The demo's questions, old and new path in turn, at concurrency 1."""
    # The old path gets models of its own with no shared memory of recent queries, so
    # that neither path finds the other's query vectors.
    transport, old_host = serve_stages(_variant(settings, shared_recent_texts=0))
    old = PerQueryEntailment(settings, transport)
    rows: list[dict[str, Any]] = []
    try:
        for ask in (old.answer, new.answer):  # warm-up: first-call allocations
            ask("What is a novel coronavirus?")
        for number, (query, expected) in enumerate(questions, start=1):
            row: dict[str, Any] = {"query": query, "expected": expected}
            for name, ask in (("old", old.answer), ("new", new.answer)):
                started = time.perf_counter()
                decision, entry = ask(query)
                row[name] = {
                    "decision": decision,
                    "entry": entry,
                    "seconds": time.perf_counter() - started,
                }
            rows.append(row)
            print(
                f"  {number}/{len(questions)} old {row['old']['seconds']:6.2f} s "
                f"{row['old']['decision']:8s} new {row['new']['seconds']:6.3f} s "
                f"{row['new']['decision']:8s} {query[:50]}",
                flush=True,
            )
    finally:
        transport.close()
        old_host.stop(0)
    return rows


def _forget_recent(settings: Settings) -> None:
    """Clear the hot-path models' memories of recent texts: each round starts as cold."""
    for key in _model_keys(settings):
        shared_profile_embedder(settings, key).forget_recent()


def _batched_round(
    settings: Settings, new: GatewayClient, loaded: list[str], concurrency: int
) -> dict[str, Any]:
    """One round: the models' limit alone, then the gateway at ``concurrency`` clients on
    the same queries, its queries/s as a share of that limit."""
    # The batch a model can get at this concurrency is at most one query per client.
    limit = _embedder_limit(settings, loaded, concurrency)  # fresh models, no memory
    _forget_recent(settings)
    counted = _passes(settings)
    cpu_before = _process_cpu_s()
    batched = _concurrent(new, loaded, concurrency)
    # The process's CPU over the run as a share of every core: below 100%, the cores
    # sat idle part of the time (waits), not short of work.
    batched["cpu_share"] = (_process_cpu_s() - cpu_before) / (
        batched["seconds"] * (os.cpu_count() or 1)
    )
    batched["passes"] = {
        key: {
            "passes": now[0] - counted[key][0],
            "texts": now[1] - counted[key][1],
            "seconds": now[2] - counted[key][2],
        }
        for key, now in _passes(settings).items()
    }
    batched["limit"] = limit
    batched["share_of_limit"] = batched["queries_per_s"] / limit["queries_per_s"]
    print(
        f"  round: limit {limit['queries_per_s']:.1f}, new {batched['queries_per_s']:.1f} "
        f"queries/s ({batched['share_of_limit']:.0%})",
        flush=True,
    )
    return batched


def _throughput(
    settings: Settings,
    new: GatewayClient,
    warm: list[str],
    loaded: list[str],
    concurrency: int,
    *,
    rounds: int,
) -> dict[str, Any]:
    """Queries/s at ``concurrency``: batched (``rounds`` rounds, each against its own
    limit: the host's speed drifts within a run), unbatched, and the embedders' limit."""
    unbatched = GatewayClient(_variant(settings, micro_batch_texts=1))
    try:
        for client in (new, unbatched):  # the KB entries' vectors, as a running service has them
            _concurrent(client, warm, concurrency)
        per_round = [_batched_round(settings, new, loaded, concurrency) for _ in range(rounds)]
        _forget_recent(settings)
        alone = _concurrent(unbatched, loaded, concurrency)
        print(f"  new, unbatched: {alone['queries_per_s']:.1f} queries/s", flush=True)
        after = _embedder_limit(settings, loaded, concurrency)
        ceiling = _embedder_limit(settings, loaded, settings.retrieval.micro_batch_texts)
    finally:
        unbatched.close()
    shares = sorted(r["share_of_limit"] for r in per_round)
    median = shares[len(shares) // 2]
    # The round whose share is the median stands for the run in the tables.
    batched = next(r for r in per_round if r["share_of_limit"] == median)
    return {
        "concurrency": concurrency,
        "queries": len(loaded),
        "rounds": per_round,
        "new": batched,
        "new_unbatched": alone,
        "limit_after": after,
        "ceiling": ceiling,
        "ceiling_batch": settings.retrieval.micro_batch_texts,
        "share_of_limit": median,
    }


def _sequential_table(rows: list[dict[str, Any]]) -> dict[str, Any]:
    table = {}
    for name in ("old", "new"):
        seconds = [r[name]["seconds"] for r in rows]
        accepted = [r for r in rows if r[name]["decision"] == "ACCEPT"]
        table[name] = {
            "right": sum(r[name]["entry"] == r["expected"] for r in accepted),
            "wrong": sum(r[name]["entry"] != r["expected"] for r in accepted),
            "paraphrases": sum(r["expected"] is not None for r in rows),
            "out_of_scope_refused": sum(
                r["expected"] is None and r[name]["decision"] != "ACCEPT" for r in rows
            ),
            "p50_s": _percentile(seconds, 0.5),
            "p95_s": _percentile(seconds, 0.95),
        }
    same = sum(
        (r["old"]["decision"], r["old"]["entry"]) == (r["new"]["decision"], r["new"]["entry"])
        for r in rows
    )
    print(f"\nconcurrency 1, the demo's {len(rows)} questions:")
    print("| path | right entry | wrong | out of scope refused | p50 s | p95 s |")
    print("|---|---|---|---|---|---|")
    labels = {"old": "old: entailment per query", "new": "new: the gateway now"}
    for name, t in table.items():
        print(
            f"| {labels[name]} | {t['right']} of {t['paraphrases']} | {t['wrong']} | "
            f"{t['out_of_scope_refused']} of {len(rows) - t['paraphrases']} | "
            f"{t['p50_s']:.3f} | {t['p95_s']:.3f} |"
        )
    share = table["new"]["p50_s"] / table["old"]["p50_s"]
    print(
        f"same decision and entry on {same} of {len(rows)}; new p50 = {share:.1%} of old "
        f"({1 / share:.0f}x faster)"
    )
    return {"paths": table, "same_decisions": same, "p50_share": share}


def _concurrent_table(result: dict[str, Any]) -> None:
    limit = result["new"]["limit"]
    print(
        f"\nconcurrency {result['concurrency']}, {result['queries']} other paraphrases, "
        f"each asked once per round, {len(result['rounds'])} rounds:"
    )
    print("| round | limit: models alone | new, queries/s | share | p50 s | p99 s |")
    print("|---|---|---|---|---|---|")
    for number, row in enumerate(result["rounds"], start=1):
        print(
            f"| {number} | {row['limit']['queries_per_s']:.1f} | {row['queries_per_s']:.1f} | "
            f"{row['share_of_limit']:.0%} | {row['p50_s']:.3f} | {row['p99_s']:.3f} |"
        )
    print(f"median share of the limit: {result['share_of_limit']:.0%}")
    unbatched = result["new_unbatched"]
    ceiling = result["ceiling"]["queries_per_s"]
    after = result["limit_after"]["queries_per_s"]
    print(
        f"new, unbatched: {unbatched['queries_per_s']:.1f} queries/s "
        f"({unbatched['queries_per_s'] / after:.0%} of the limit taken right after it, "
        f"{after:.1f}); the embedders alone in batches of {result['ceiling_batch']}: "
        f"{ceiling:.1f} ({ceiling / after:.0%} of it)"
    )
    print(
        f"this process (the gateway, its in-process stages and the clients) used "
        f"{result['new']['cpu_share']:.0%} of the machine's {os.cpu_count()} cores "
        f"during the median round (limit {limit['queries_per_s']:.1f} queries/s)"
    )
    print("\nthe models' passes inside the gateway (median round) vs the same queries alone:")
    print("| model | passes | texts per pass | seconds in passes | alone, batches of 16 |")
    print("|---|---|---|---|---|")
    for key, row in result["new"]["passes"].items():
        alone = limit["models"][key]
        print(
            f"| {key} | {row['passes']} | {row['texts'] / max(1, row['passes']):.1f} | "
            f"{row['seconds']:.2f} | {alone:.2f} |"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=8, help="paraphrases (+4 out of scope)")
    parser.add_argument("--concurrent-queries", type=int, default=192)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--rounds", type=int, default=3, help="concurrent rounds, each against its own limit"
    )
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--seed", type=int, default=7, help="the demo's default")
    parser.add_argument("--out", type=Path, default=Path(".build/bench/gateway.json"))
    args = parser.parse_args()

    settings = _bench_settings(args.concurrency)
    _ingest(settings, args.data, COLLECTION)
    questions = _questions(args.data, args.queries, args.seed)
    asked = {q for q, _ in questions}
    warm = _paraphrases(args.data, asked, 64, args.seed + 1)
    loaded = _paraphrases(args.data, asked | set(warm), args.concurrent_queries, args.seed + 2)
    load_before = os.getloadavg()
    new = GatewayClient(settings)
    try:
        rows = _sequential(settings, new, questions)
        concurrent = _throughput(settings, new, warm, loaded, args.concurrency, rounds=args.rounds)
    finally:
        new.close()
    load_after = os.getloadavg()
    sequential = _sequential_table(rows)
    _concurrent_table(concurrent)
    print(f"load average before {load_before}, after {load_after}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "load_before": load_before,
        "load_after": load_after,
        "concurrency_1": sequential,
        "concurrent": concurrent,
        "rows": rows,
    }
    args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
