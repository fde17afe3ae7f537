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
- **new, one pass at a time**: the same gateway with ``retrieval.embed_lanes: 1``: one
  forward pass at a time over every core, as the gateway ran them before passes ran side
  by side, one core each. Asked in the same rounds, the order alternating.
- **new, passes not spread**: the same gateway with ``retrieval.micro_batch_spread:
  false`` (a pass under load takes every queued call, instead of its lane's part of the
  texts in flight). Asked in the same rounds.
- **new, unbatched**: the same gateway with ``retrieval.micro_batch_texts: 1`` (one
  forward pass per call, the calls still queued for the model's workers), at
  concurrency 16: what micro-batching adds.
- **limit**: the same models' batched throughput on the same queries, alone (no gRPC,
  no cache), in batches of 16 — the largest batch 16 clients can form — the faster of
  one pass at a time over every core (one model after the other) and one
  single-threaded pass per core at once: a gateway can answer no faster than it embeds
  its queries. Also shown: batches of ``retrieval.micro_batch_texts`` (64), the models'
  ceiling at any concurrency; and, each round, the models alone in passes of the sizes
  they had inside the gateway: what the passes' size alone leaves of the limit (the
  rest of the gap is the service's own work and idle cores).
- **own work**: after the last round, every query asked again (its vectors now in the
  models' memories, so no forward pass runs): the process's CPU milliseconds per query,
  against the models' core-milliseconds per query at the limit. On a host whose cores
  run the service and the models both, ``models / (models + own)`` is the most of the
  limit any scheduling of the passes could reach there: the share depends on how fast
  the host runs the models next to the service's Python.

At concurrency 1 the demo's questions alternate between the paths (old, new, old, ...)
after one warm-up each, and their decisions are compared. At concurrency 16 the
queries are other paraphrases from the same file, after a warm-up set that fills the
matcher's cache of KB entries as a running service's is. The host's speed drifts by
more than the effect within one run, so the batched gateway runs in ``--rounds``
rounds: each round clears the models' memories of recent texts (no query is served
from an earlier round), takes its own limit, then asks every query once; the median
round's share is the figure. The limit is taken before and after each round's gateway
runs, and a share is taken against their mean.

    .venv/bin/python bench/gateway.py [--queries 8] [--concurrent-queries 192]
        [--rounds 3] [--out .build/bench/gateway.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from _gateway_report import concurrent_table, percentile, sequential_table
from tribunal.commands.demo import _in_process_settings, _ingest, _questions
from tribunal.core import Settings, apply_thread_policy, use_torch_threads
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
        "p50_s": percentile(seconds, 0.5),
        "p99_s": percentile(seconds, 0.99),
        "accepted": decisions.count("ACCEPT"),
    }


def _without_passes(client: GatewayClient, queries: list[str], concurrency: int) -> dict[str, Any]:
    """:func:`_concurrent` on queries whose vectors are all in the models' memories of
    recent texts (asked just before), so no forward pass runs: with the process's CPU
    milliseconds per query, the service's own work (gRPC, search, checks, features,
    confidence, the audit write; the clients' gRPC work too)."""
    cpu_before = _process_cpu_s()
    result = _concurrent(client, queries, concurrency)
    result["cpu_ms_per_query"] = 1000 * (_process_cpu_s() - cpu_before) / len(queries)
    return result


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


def _embedder_limit(
    settings: Settings,
    queries: list[str],
    size: int | dict[str, int],
    keys: list[str] | None = None,
) -> dict[str, Any]:
    """The hot path's models (``keys``; default retrieval's embedder, then the feature
    matcher's) embedding the queries alone in batches of ``size`` (per model, where a
    dict) (fresh models, no cache), the faster of two ways: one pass at a time over every
    core, one model after the other; or one single-threaded pass per core at once, each
    core taking its share of the queries through every model. Queries/s."""
    cores = apply_thread_policy(settings.server.compute_threads)
    keys = _model_keys(settings) if keys is None else keys
    models = {key: load_profile_embedder(settings, key) for key in keys}
    sizes = size if isinstance(size, dict) else dict.fromkeys(keys, size)
    for key, embedder in models.items():
        embedder.embed(queries[: sizes[key]])  # warm-up
    per_model = {}
    for key, embedder in models.items():
        started = time.perf_counter()
        for start in range(0, len(queries), sizes[key]):
            embedder.embed(queries[start : start + sizes[key]])
        per_model[key] = time.perf_counter() - started
    sequential = len(queries) / sum(per_model.values())

    def lane(share: list[str]) -> None:
        use_torch_threads(1)
        for key, embedder in models.items():
            for start in range(0, len(share), sizes[key]):
                embedder.embed(share[start : start + sizes[key]])

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=cores) as pool:
        list(pool.map(lane, [queries[i::cores] for i in range(cores)]))
    side_by_side = len(queries) / (time.perf_counter() - started)
    return {
        "models": per_model,
        "one_at_a_time_queries_per_s": sequential,
        "side_by_side_queries_per_s": side_by_side,
        "queries_per_s": max(sequential, side_by_side),
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


def served_demo_kb(concurrency: int, data: Path = SHARED) -> Settings:
    """The bench's settings for ``concurrency`` clients, with the demo's FAQ ingested
    into :data:`COLLECTION` (what every gateway benchmark here starts from)."""
    settings = _bench_settings(concurrency)
    _ingest(settings, data, COLLECTION)
    return settings


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


def _measured(
    settings: Settings, client: GatewayClient, loaded: list[str], concurrency: int
) -> dict[str, Any]:
    """The gateway at ``concurrency`` clients on ``loaded``, its models' memories of
    recent texts cleared first: queries/s, the process's CPU share and the passes."""
    _forget_recent(settings)
    counted = _passes(settings)
    cpu_before = _process_cpu_s()
    batched = _concurrent(client, loaded, concurrency)
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
    return batched


def _batched_round(
    variants: dict[str, tuple[Settings, GatewayClient]],
    loaded: list[str],
    concurrency: int,
    *,
    number: int,
) -> dict[str, Any]:
    """One round: the models' limit alone, each variant of the gateway at
    ``concurrency`` clients on the same queries (in turn, the order alternating round
    by round), the limit again; each variant's queries/s as a share of the mean of the
    two limits (the host's speed drifts within a round too)."""
    settings = next(iter(variants.values()))[0]
    # The batch a model can get at this concurrency is at most one query per client.
    before = _embedder_limit(settings, loaded, concurrency)  # fresh models, no memory
    names = list(variants) if number % 2 == 0 else list(reversed(variants))
    measured = {
        name: _measured(variants[name][0], variants[name][1], loaded, concurrency) for name in names
    }
    after = _embedder_limit(settings, loaded, concurrency)
    # The models alone in passes of the sizes they had inside the first variant's
    # gateway (the default): how much of the gap is the passes' size, the rest being the
    # service's own work and idle cores.
    gateway_sizes = {
        key: max(1, round(p["texts"] / max(1, p["passes"])))
        for key, p in measured[next(iter(variants))]["passes"].items()
    }
    at_sizes = _embedder_limit(settings, loaded, gateway_sizes)
    limit = {
        "queries_per_s": (before["queries_per_s"] + after["queries_per_s"]) / 2,
        "before": before,
        "after": after,
        "models": before["models"],
    }
    at_sizes["sizes"] = gateway_sizes
    at_sizes["share_of_limit"] = at_sizes["queries_per_s"] / limit["queries_per_s"]
    row: dict[str, Any] = {"limit": limit, "order": names, "at_gateway_sizes": at_sizes}
    for name, batched in measured.items():
        batched["share_of_limit"] = batched["queries_per_s"] / limit["queries_per_s"]
        row[name] = batched
    print(
        f"  round: limit {limit['queries_per_s']:.1f} (before {before['queries_per_s']:.1f}, "
        f"after {after['queries_per_s']:.1f}); "
        + ", ".join(
            f"{name} {row[name]['queries_per_s']:.1f} queries/s ({row[name]['share_of_limit']:.0%})"
            for name in variants
        )
        + f"; the models alone in the gateway's pass sizes {at_sizes['queries_per_s']:.1f} "
        f"({at_sizes['share_of_limit']:.0%})",
        flush=True,
    )
    return row


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
    limit: the host's speed drifts within a run), with passes side by side and spread
    (the default), one pass at a time (``retrieval.embed_lanes: 1``) and passes not
    spread (``retrieval.micro_batch_spread: false``); unbatched; and the embedders'
    limit."""
    one_lane_settings = _variant(settings, embed_lanes=1)
    one_lane = GatewayClient(one_lane_settings)
    unspread_settings = _variant(settings, micro_batch_spread=False)
    unspread = GatewayClient(unspread_settings)
    unbatched = GatewayClient(_variant(settings, micro_batch_texts=1))
    variants = {
        "new": (settings, new),
        "one_pass_at_a_time": (one_lane_settings, one_lane),
        "not_spread": (unspread_settings, unspread),
    }
    try:
        for client in (new, one_lane, unspread, unbatched):
            # The KB entries' vectors, as a running service has them.
            _concurrent(client, warm, concurrency)
        per_round = [
            _batched_round(variants, loaded, concurrency, number=number) for number in range(rounds)
        ]
        # The last round left every query's vectors in the models' memories: asked again,
        # what the gateway spends is its own work, on this host, this hour.
        counted = _passes(settings)
        own_work = [_without_passes(new, loaded, concurrency) for _ in range(3)]
        # Checked, not assumed: a pass here would count model work as the service's.
        own_passes = sum(now[0] - counted[key][0] for key, now in _passes(settings).items())
        _forget_recent(settings)
        alone = _concurrent(unbatched, loaded, concurrency)
        print(f"  new, unbatched: {alone['queries_per_s']:.1f} queries/s", flush=True)
        after = _embedder_limit(settings, loaded, concurrency)
        ceiling = _embedder_limit(settings, loaded, settings.retrieval.micro_batch_texts)
    finally:
        unbatched.close()
        unspread.close()
        one_lane.close()
    shares = sorted(r["new"]["share_of_limit"] for r in per_round)
    median = shares[len(shares) // 2]
    # The round whose share is the median stands for the run in the tables.
    median_round = next(r for r in per_round if r["new"]["share_of_limit"] == median)
    batched = dict(median_round["new"], limit=median_round["limit"])
    own_ms = statistics.median(r["cpu_ms_per_query"] for r in own_work)
    # The models' core-milliseconds per query at the limit: the cores over its rate.
    models_ms = 1000 * (os.cpu_count() or 1) / batched["limit"]["queries_per_s"]
    ratios = sorted(
        r["new"]["queries_per_s"] / r["one_pass_at_a_time"]["queries_per_s"] for r in per_round
    )
    over_unspread = sorted(
        r["new"]["queries_per_s"] / r["not_spread"]["queries_per_s"] for r in per_round
    )
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
        "own_work": {
            "rounds": own_work,
            "cpu_ms_per_query": own_ms,
            "models_core_ms_per_query": models_ms,
            # With passes as cheap as alone and no core idle, the gateway could reach
            # this share of the limit on this host, and no more.
            "share_allowed": models_ms / (models_ms + own_ms),
            "forward_passes": own_passes,
        },
        "side_by_side_over_one_at_a_time": ratios[len(ratios) // 2],
        "spread_over_not_spread": over_unspread[len(over_unspread) // 2],
    }


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

    settings = served_demo_kb(args.concurrency, args.data)
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
    sequential = sequential_table(rows)
    concurrent_table(concurrent)
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
