"""Overload run: the gateway offered 4x what it can serve, open loop.

``python -m loadtest.overload`` builds the verified COVID FAQ KB of
:mod:`.faults`, starts the retrieval, ensemble and confidence services as separate
processes (``tribunal serve``) and a gateway in this process dialling them, with
admission control set small (``--max-ongoing`` calls at work, ``--max-queued`` waiting).
Then, with ``Answer`` on ``--queries`` real user questions (asked once each first, so
that every phase finds the stages' caches warm):

1. **unloaded**: one client, back to back: the latency of a request that never waits;
2. **capacity**: a closed loop of ``--max-ongoing`` clients: the throughput the gateway
   sustains (requests/s);
3. **overload**: an open loop (Poisson arrivals, latency from each intended send time)
   at ``--factor`` times that capacity for ``--duration`` seconds, while the resident
   memory of every process is sampled each second.

The JSON summary (``--out``) has each phase's throughput, latency percentiles and status
codes, how fast refusals came (RESOURCE_EXHAUSTED), the served requests' p99 against the
unloaded p99, and memory at the start, middle and end of the overload; the PNG next to it
plots the overload's latencies.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
from tribunal.core import Settings

from ._grpc import GatewayClient
from ._report import plot, summarize
from ._runner import Sample, run_closed, run_open
from ._schedule import percentile
from .faults import COLLECTION, STAGES, StageProcesses, _entry_ids, _settings, build_kb, queries

__all__ = ["main"]

_SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "covid-qa"


class MemorySampler:
    """Resident memory (MB) of this process and the stage processes, once a second."""

    def __init__(self, pids: list[int]) -> None:
        self.processes = [psutil.Process(pid) for pid in [os.getpid(), *pids]]
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._started = 0.0

    def _total_mb(self) -> float:
        total = 0
        for process in self.processes:
            with contextlib.suppress(psutil.Error):
                total += process.memory_info().rss
        return total / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.samples.append((time.perf_counter() - self._started, self._total_mb()))
            self._stop.wait(1.0)

    def __enter__(self) -> MemorySampler:
        self._started = time.perf_counter()
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict[str, Any]:
        values = [mb for _, mb in self.samples]
        third = max(1, len(values) // 3)
        return {
            "samples": len(values),
            "start_mb": round(values[0], 1) if values else None,
            "first_third_mean_mb": round(sum(values[:third]) / third, 1) if values else None,
            "last_third_mean_mb": round(sum(values[-third:]) / third, 1) if values else None,
            "max_mb": round(max(values), 1) if values else None,
            "end_mb": round(values[-1], 1) if values else None,
        }


def _phase(samples: list[Sample], wall: float, setup: dict[str, Any]) -> dict[str, Any]:
    summary = summarize(samples, wall, setup)
    refused = [s.latency_s * 1000 for s in samples if s.code == "RESOURCE_EXHAUSTED"]
    summary["refused_latency_ms"] = {
        "p50": percentile(refused, 50),
        "p99": percentile(refused, 99),
        "max": max(refused, default=float("nan")),
    }
    return summary


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m loadtest.overload", description=__doc__)
    parser.add_argument("--max-ongoing", type=int, default=2, help="server.max_ongoing_requests")
    parser.add_argument("--max-queued", type=int, default=1, help="server.max_queued_requests")
    parser.add_argument("--factor", type=float, default=4.0, help="overload / capacity")
    parser.add_argument("--queries", type=int, default=40, help="distinct questions asked")
    parser.add_argument("--unloaded", type=int, default=60, help="requests of phase 1")
    parser.add_argument("--capacity-requests", type=int, default=60, help="requests of phase 2")
    parser.add_argument("--duration", type=float, default=120.0, help="overload, seconds")
    parser.add_argument("--timeout", type=float, default=30.0, help="client deadline, s")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--data", type=Path, default=_SHARED, help="the covid-qa folder")
    parser.add_argument("--out", type=Path, default=Path(".build/overload/run.json"))
    return parser


def _gateway(args: argparse.Namespace, settings: Settings, stages: StageProcesses) -> Any:
    from tribunal.gateway.servicer import build_host

    addresses = {stage: f"127.0.0.1:{port}" for stage, port in stages.ports.items()}
    addresses["entailment"] = addresses["debate"] = addresses["ensemble"]
    settings = settings.model_copy(
        update={"gateway": settings.gateway.model_copy(update={"addresses": addresses})}
    )
    host = build_host(settings)
    host.start()
    assert host.wait_until_ready(120), host.load_error
    return host


def _drive(
    args: argparse.Namespace, client: GatewayClient, asked: list[str], pids: list[int]
) -> dict[str, Any]:
    call = client.answer_call(asked)
    # Warm-up, not reported: every question once (the matcher caches the KB's embeddings).
    run_closed(call, concurrency=1, requests=len(asked), duration_s=900)
    samples, wall = run_closed(call, concurrency=1, requests=args.unloaded, duration_s=600)
    unloaded = _phase(samples, wall, {"phase": "unloaded", "mode": "closed", "concurrency": 1})
    unloaded["load_average"] = os.getloadavg()
    samples, wall = run_closed(
        call, concurrency=args.max_ongoing, requests=args.capacity_requests, duration_s=600
    )
    capacity = _phase(
        samples, wall, {"phase": "capacity", "mode": "closed", "concurrency": args.max_ongoing}
    )
    capacity["load_average"] = os.getloadavg()
    rate = args.factor * capacity["throughput_rps"]
    with MemorySampler(pids) as memory:
        samples, wall = run_open(
            call,
            rate=rate,
            requests=int(rate * args.duration) + 1,
            duration_s=args.duration,
            seed=args.seed,
            drain_s=args.timeout + 10,
        )
    overload = _phase(
        samples,
        wall,
        {"phase": "overload", "mode": "open", "rate": round(rate, 3), "method": "Answer"},
    )
    overload["load_average"] = os.getloadavg()
    overload["memory"] = memory.summary()
    overload["memory_samples"] = [[round(t, 1), round(mb, 1)] for t, mb in memory.samples]
    return {"unloaded": unloaded, "capacity": capacity, "overload": overload}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    work = args.out.parent / "work"
    data_dir = work / "data"
    work.mkdir(parents=True, exist_ok=True)
    kb_counts = build_kb(data_dir, args.data / "faq_kb_en.jsonl", stale_share=0.0, seed=args.seed)
    print(f"KB {COLLECTION}: {kb_counts}", flush=True)
    settings = _settings(
        data_dir,
        database_url=f"sqlite:///{work}/audit-{args.seed}.db",
        server={
            "port": 0,
            "metrics_port": None,
            "grace_seconds": 0.5,
            "max_ongoing_requests": args.max_ongoing,
            "max_queued_requests": args.max_queued,
        },
        gateway={"discovery": "grpc", "collection": COLLECTION, "retry_backoff_s": 0.05},
    )
    stages = StageProcesses(data_dir, work)
    for stage in STAGES:
        stages.start(stage)
    host = None
    try:
        stages.wait_ready(900)
        host = _gateway(args, settings, stages)
        _, ids = _entry_ids(data_dir, settings)
        asked = queries(args.data / "question_similarity_en.jsonl", ids, args.queries, args.seed)
        client = GatewayClient(f"127.0.0.1:{host.port}", timeout_s=args.timeout)
        try:
            phases = _drive(args, client, asked, [p.pid for p in stages.procs.values()])
        finally:
            client.close()
    finally:
        if host is not None:
            host.stop(0)
        stages.stop()
    unloaded_p99 = phases["unloaded"]["latency_ms"]["p99"]
    served_p99 = phases["overload"]["latency_ms"]["p99"]
    result = {
        "command": "python -m loadtest.overload " + " ".join(argv or sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{os.cpu_count()} CPUs",
        "admission": {
            "max_ongoing_requests": args.max_ongoing,
            "max_queued_requests": args.max_queued,
        },
        "capacity_rps": phases["capacity"]["throughput_rps"],
        "served_p99_over_unloaded_p99": served_p99 / unloaded_p99 if unloaded_p99 else None,
        **phases,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, allow_nan=True))
    plot(phases["overload"], args.out.with_suffix(".png"))
    overload = phases["overload"]
    print(
        f"capacity {result['capacity_rps']:.2f} req/s; overload at {overload['rate']} req/s: "
        f"{overload['ok']}/{overload['requests']} served, errors {overload['errors_by_code']}; "
        f"served p99 {served_p99:.0f} ms vs unloaded p99 {unloaded_p99:.0f} ms; refusals p99 "
        f"{overload['refused_latency_ms']['p99']:.1f} ms; memory {overload['memory']} "
        f"-> {args.out}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
