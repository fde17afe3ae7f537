"""In-process ``Answer`` latency split by stage, and the share spent outside model calls.

The gateway runs with every stage in this process (``gateway.discovery:
in-process``, the embedded default) on the COVID FAQ; it answers a seeded
sample of real user paraphrases plus out-of-scope questions, after one
warm-up query. Per stage: p50 / p95 of the time the gateway waited on it (the
stage's model work plus one loopback gRPC hop). "Outside the stages" is the
client-measured total minus the critical path of stage waits (retrieval +
max(ensemble, entailment) + confidence): validation, fan-out, signal assembly,
the audit write, and the gateway's own gRPC hop. A second, trivial measure
puts one loopback gRPC hop in proportion: a health check on the same server.
Ratios, not absolute times: the machine is shared.

    .venv/bin/python bench/gateway.py [--queries 8] [--out .build/bench/gateway.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import grpc
from tribunal.commands.demo import _in_process_settings, _ingest, _questions, _start_gateway
from tribunal.v1 import common_pb2, gateway_pb2, gateway_pb2_grpc

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "covid-qa"


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=8, help="paraphrases (+4 out of scope)")
    parser.add_argument("--data", type=Path, default=SHARED)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, default=Path(".build/bench/gateway.json"))
    args = parser.parse_args()

    settings = _in_process_settings(None, 0.5)
    # Latency is what is measured here, so no stage may time out into a fallback.
    gateway = settings.gateway.model_copy(
        update={
            "deadline_s": 3600.0,
            "stage_timeout_s": dict.fromkeys(settings.gateway.stage_timeout_s, 1800.0),
        }
    )
    settings = settings.model_copy(update={"gateway": gateway})
    _ingest(settings, args.data, "covid-bench")
    questions = _questions(args.data, args.queries, args.seed)
    host, port = _start_gateway(settings)
    rows: list[dict[str, Any]] = []
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = gateway_pb2_grpc.GatewayServiceStub(channel)  # type: ignore[no-untyped-call]

            def ask(query: str) -> tuple[float, gateway_pb2.AnswerResponse]:
                started = time.perf_counter()
                reply = stub.Answer(
                    gateway_pb2.AnswerRequest(query=query, collection="covid-bench"), timeout=600
                )
                return (time.perf_counter() - started) * 1000.0, reply

            ask("What is a novel coronavirus?")  # warm-up: first-call allocations, caches
            for number, (query, _expected) in enumerate(questions, start=1):
                total_ms, reply = ask(query)
                stages = {s.stage: s.milliseconds for s in reply.latencies}
                critical = (
                    stages.get("retrieval", 0.0)
                    + max(stages.get("ensemble", 0.0), stages.get("entailment", 0.0))
                    + stages.get("confidence", 0.0)
                )
                rows.append(
                    {
                        "query": query,
                        "decision": common_pb2.Decision.Name(reply.decision),
                        "total_ms": total_ms,
                        "stages_ms": stages,
                        "outside_ms": max(0.0, total_ms - critical),
                    }
                )
                print(f"  {number}/{len(questions)} {total_ms:8.0f} ms  {query[:60]}", flush=True)
        hop_ms = _loopback_hop_ms(port)
    finally:
        host.stop(0)

    table: dict[str, dict[str, float]] = {}
    for stage in ("retrieval", "ensemble", "entailment", "confidence"):
        values = [r["stages_ms"][stage] for r in rows if stage in r["stages_ms"]]
        if values:
            table[stage] = {"p50": _percentile(values, 0.5), "p95": _percentile(values, 0.95)}
    totals = [r["total_ms"] for r in rows]
    table["total (client)"] = {"p50": _percentile(totals, 0.5), "p95": _percentile(totals, 0.95)}
    outside = [r["outside_ms"] for r in rows]
    table["outside the stages"] = {
        "p50": _percentile(outside, 0.5),
        "p95": _percentile(outside, 0.95),
    }
    share = sum(outside) / sum(totals)
    print("\n| part of Answer | p50 ms | p95 ms |\n|---|---|---|")
    for name, values in table.items():
        print(f"| {name} | {values['p50']:.0f} | {values['p95']:.0f} |")
    print(
        f"\nshare of the time outside model stages: {share:.4f} "
        f"(mean {statistics.mean(outside):.1f} ms of {statistics.mean(totals):.0f} ms); "
        f"one loopback gRPC hop (trivial Score call): {hop_ms:.2f} ms median"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {"stages": table, "outside_share": share, "loopback_hop_ms": hop_ms, "rows": rows},
            indent=2,
        )
    )
    return 0


def _loopback_hop_ms(port: int, calls: int = 200) -> float:
    """Median round trip of the cheapest call on the same server: a health check."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            stub.Check(health_pb2.HealthCheckRequest(), timeout=10)
            times.append((time.perf_counter() - started) * 1000.0)
    return statistics.median(times)


if __name__ == "__main__":
    raise SystemExit(main())
