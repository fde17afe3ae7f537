"""Ray Serve vs the in-process gateway, batching, proxy overhead, autoscaling, memory.

Measured side by side in one run on a local single-node Ray (loopback, auth
off, dashboard off, temp dir .build/ray), every application deployed from the
Serve config ``tribunal serve config`` writes, clients through Serve's gRPC
proxy (metadata ``application``). Ratios, not absolute times: the machine is a
shared 2-core VM.

Parts (``--parts``, default all but ``memory``), on the load-test scenario
(loadtest/scenario.py: COVID FAQ, every LLM role on the 135M model with
llama.cpp, one thread; a majority ensemble of one judge; a calibrator fitted on
synthetic signals):

- ``proxy``: a trivial call (``Confidence.Score``) through Serve's gRPC proxy
  vs the same servicer in a plain ``ServiceHost``: sequential latency and
  8-thread throughput.
- ``throughput``: ``Answer`` closed loop at concurrency 1, 8, 32 through Ray
  Serve vs the in-process gateway (``gateway.discovery: in-process``).
- ``batching``: the ensemble's judges with ``@serve.batch`` (max_batch_size 8)
  vs off (1), ``Match`` at concurrency 16, on the transformers backend (llama.cpp
  runs one sequence at a time, so it cannot batch).
- ``autoscale``: the ensemble at min 1 / max 2 replicas, target 2 ongoing
  requests; ``Answer`` load at concurrency 16 and the replica count sampled
  every second, with the controller's scaling log lines.

``memory`` (run alone): the real tiny profile (1.5B/0.5B/135M on transformers,
each service loading its own copy), one ``Answer`` and one debate ``Label`` to
load every lazily loaded model, then the PSS/RSS of every Ray process.

    .venv/bin/python bench/serve.py [--parts proxy,throughput,batching,autoscale]
    .venv/bin/python bench/serve.py --parts memory --out .build/bench/serve-memory.json
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tribunal.core import Settings, load_settings
from tribunal.deploy import (
    deploy,
    ray_memory,
    replica_counts,
    serve_config,
    start_local,
    validate_serve_config,
    wait_running,
)
from tribunal.v1 import (
    common_pb2,
    confidence_pb2,
    confidence_pb2_grpc,
    ensemble_pb2,
    ensemble_pb2_grpc,
    gateway_pb2,
    gateway_pb2_grpc,
)

from loadtest import GatewayClient, Outcome, run_closed, summarize
from loadtest.scenario import (
    covid_questions,
    fit_synthetic_calibrator,
    ingest_faq,
    scenario_overrides,
    scenario_settings,
)

REPO = Path(__file__).resolve().parents[1]
COVID = REPO.parent / "shared" / "data" / "covid-qa"
if not COVID.is_dir():
    COVID = Path("/work/shared/data/covid-qa")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _pct(values: list[float], q: float) -> float:
    return float(statistics.quantiles(values, n=100)[int(q) - 1]) if len(values) > 1 else values[0]


class Bench:
    """One local Ray running the stack; results accumulate in ``self.results``."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.root = args.work
        self.results: dict[str, Any] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
        self.grpc_port = _free_port()
        self.config: dict[str, Any] = {}
        self.overrides: dict[str, Any] = {}
        self.settings: Settings | None = None
        self.channel: grpc.Channel | None = None

    def save(self) -> None:
        self.args.out.parent.mkdir(parents=True, exist_ok=True)
        self.args.out.write_text(json.dumps(self.results, indent=2, default=str))

    # -- the stack ------------------------------------------------------------------
    def start(self, overrides: dict[str, Any], settings: Settings) -> None:
        self.overrides, self.settings = overrides, settings
        self.config = serve_config(
            settings, grpc_port=self.grpc_port, http_port=_free_port(), overrides=overrides
        )
        validate_serve_config(self.config)
        started = time.perf_counter()
        start_local(self.config, temp_dir=REPO / ".build" / "ray")
        deploy(self.config)
        wait_running([a["name"] for a in self.config["applications"]], timeout_s=1200)
        self.results["deploy_s"] = time.perf_counter() - started
        print(f"all applications running in {self.results['deploy_s']:.0f} s", flush=True)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")

    def stop(self) -> None:
        import ray
        from ray import serve

        if self.channel is not None:
            self.channel.close()
        serve.shutdown()
        ray.shutdown()

    def app(self, name: str) -> dict[str, Any]:
        return next(a for a in self.config["applications"] if a["name"] == name)

    # -- parts ------------------------------------------------------------------------
    def proxy(self) -> None:
        """A trivial call through Serve's gRPC proxy vs a plain ServiceHost."""
        from tribunal.confidence.servicer import build_host

        assert self.settings is not None
        host = build_host(self.settings)
        port = host.start()
        assert host.wait_until_ready(60), host.load_error
        request = confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(ensemble_p_match=0.7))
        rows: dict[str, Any] = {}
        try:
            for name, target, metadata in (
                ("ServiceHost (direct gRPC)", f"127.0.0.1:{port}", ()),
                (
                    "Ray Serve gRPC proxy",
                    f"127.0.0.1:{self.grpc_port}",
                    (("application", "confidence"),),
                ),
            ):
                latencies, rate = _trivial(target, metadata, request, self.args.trivial_calls)
                rows[name] = {
                    "p50_ms": statistics.median(latencies),
                    "p99_ms": _pct(latencies, 99),
                    "calls_per_s_8_threads": rate,
                }
                print(
                    f"  {name}: p50 {rows[name]['p50_ms']:.2f} ms, {rate:.0f} calls/s", flush=True
                )
        finally:
            host.stop(0)
        direct, served = rows["ServiceHost (direct gRPC)"], rows["Ray Serve gRPC proxy"]
        rows["proxy_overhead_p50_ms"] = served["p50_ms"] - direct["p50_ms"]
        rows["latency_ratio_p50"] = served["p50_ms"] / direct["p50_ms"]
        rows["throughput_ratio"] = served["calls_per_s_8_threads"] / direct["calls_per_s_8_threads"]
        self.results["proxy"] = rows

    def throughput(self, questions: list[str]) -> None:
        """Answer at each concurrency through Serve and through the in-process gateway."""
        from tribunal.gateway.servicer import build_host

        assert self.settings is not None
        local = self.settings.model_copy(
            update={"gateway": self.settings.gateway.model_copy(update={"discovery": "in-process"})}
        )
        host = build_host(local)
        port = host.start()
        assert host.wait_until_ready(900), host.load_error
        table: dict[str, Any] = {}
        try:
            targets = {
                "ray_serve": GatewayClient(
                    f"127.0.0.1:{self.grpc_port}", application="gateway", timeout_s=300
                ),
                "in_process": GatewayClient(f"127.0.0.1:{port}", timeout_s=300),
            }
            for client in targets.values():  # warm-up: first-call allocations and caches
                client.answer_call(questions)(0)
            for level in self.args.levels:
                requests = max(self.args.min_requests, 2 * level)
                for name, client in targets.items():
                    samples, wall = run_closed(
                        client.answer_call(questions),
                        concurrency=level,
                        requests=requests,
                        duration_s=self.args.level_seconds,
                    )
                    summary = summarize(samples, wall, {"concurrency": level, "target": name})
                    summary.pop("samples")
                    table[f"{name}@{level}"] = summary
                    print(
                        f"  {name} c={level}: {summary['ok']}/{summary['requests']} OK "
                        f"{summary['throughput_rps']:.2f} req/s "
                        f"p50 {summary['latency_ms']['p50']:.0f} "
                        f"p99 {summary['latency_ms']['p99']:.0f} ms {summary['decisions']} "
                        f"{summary['errors_by_code']}",
                        flush=True,
                    )
                    self.results["throughput"] = table
                    self.save()
            for client in targets.values():
                client.close()
        finally:
            host.stop(0)

    def batching(self, questions: list[str]) -> None:
        """The judges with @serve.batch (8) vs without (1), Match at concurrency 16."""
        from ray import serve
        from tribunal.deploy.apps import build, settings_from_args

        rows: dict[str, Any] = {}
        entry = common_pb2.KbEntry(
            id="faq",
            question="How does the virus spread?",
            answer="Mainly between people who are in close contact with one another.",
        )
        # Alternating rounds (1, 8, 1, 8, ...): load the machine's other users add falls on both.
        sizes = [size for _ in range(self.args.batch_rounds) for size in (1, 8)]
        for round_number, size in enumerate(sizes):
            name = f"judges-batch-{size}"
            args = {
                "profile": "tiny",
                "settings": {
                    **self.overrides,
                    "llm_backend": "transformers",
                    "ensemble": {
                        **self.overrides.get("ensemble", {}),
                        "deployment": {
                            "num_cpus": 0.25,
                            "max_batch_size": size,
                            "max_ongoing_requests": 32,
                            "batch_wait_timeout_s": 0.02,
                        },
                    },
                },
            }
            serve.run(
                build("ensemble", settings_from_args(args)), name=name, route_prefix=f"/{name}"
            )
            with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
                stub = ensemble_pb2_grpc.EnsembleServiceStub(channel)
                metadata = (("application", name),)

                call = _match_call(stub, metadata, questions, entry)
                call(0)  # warm-up (model load happened in the constructor)
                samples, wall = run_closed(
                    call, concurrency=16, requests=self.args.batch_requests, duration_s=300
                )
            summary = summarize(samples, wall, {"max_batch_size": size})
            summary.pop("samples")
            rows[f"round {round_number // 2 + 1}: max_batch_size={size}"] = summary
            print(
                f"  batch {size}: {summary['throughput_rps']:.2f} Match/s p50 "
                f"{summary['latency_ms']['p50']:.0f} ms {summary['errors_by_code']}",
                flush=True,
            )
            serve.delete(name)
        ratios = [
            rows[f"round {r}: max_batch_size=8"]["throughput_rps"]
            / rows[f"round {r}: max_batch_size=1"]["throughput_rps"]
            for r in range(1, self.args.batch_rounds + 1)
        ]
        rows["throughput_ratio_batched_over_unbatched_per_round"] = ratios
        rows["throughput_ratio_batched_over_unbatched_median"] = statistics.median(ratios)
        self.results["batching"] = rows

    def autoscale(self, questions: list[str]) -> None:
        """Replicas of the ensemble rise under Answer load."""
        scaling = self.app("ensemble")["deployments"][0]["autoscaling_config"]
        scaling.update(
            min_replicas=1,
            max_replicas=2,
            target_ongoing_requests=2,
            upscale_delay_s=2.0,
            downscale_delay_s=600.0,
            metrics_interval_s=1.0,
            look_back_period_s=5.0,
        )
        deploy(self.config)
        wait_running(["ensemble"], timeout_s=300)
        client = GatewayClient(f"127.0.0.1:{self.grpc_port}", application="gateway", timeout_s=300)
        timeline: list[tuple[float, int]] = []
        done = threading.Event()
        started = time.perf_counter()

        def sample() -> None:
            while not done.is_set():
                running = replica_counts().get("ensemble", {}).get("RUNNING", 0)
                timeline.append((round(time.perf_counter() - started, 1), running))
                done.wait(1.0)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        samples, wall = run_closed(
            client.answer_call(questions),
            concurrency=16,
            requests=self.args.autoscale_requests,
            duration_s=self.args.autoscale_seconds,
        )
        done.set()
        sampler.join()
        client.close()
        summary = summarize(samples, wall, {"concurrency": 16})
        summary.pop("samples")
        first_two = next((t for t, n in timeline if n >= 2), None)
        self.results["autoscale"] = {
            "config": scaling,
            "timeline_s_running": timeline,
            "max_running": max(n for _, n in timeline),
            "first_second_with_2_running": first_two,
            "load": summary,
            "controller_log": _scaling_log_lines(),
        }
        print(
            f"  ensemble replicas: max {self.results['autoscale']['max_running']}, "
            f"2 running from t={first_two} s",
            flush=True,
        )

    def memory(self) -> None:
        """The real tiny profile, every model loaded, then every Ray process's memory."""
        channel = self.channel
        assert channel is not None
        stub = gateway_pb2_grpc.GatewayServiceStub(channel)
        metadata = (("application", "gateway"),)
        started = time.perf_counter()
        answer = stub.Answer(
            gateway_pb2.AnswerRequest(query="How does the virus spread?"),
            metadata=metadata,
            timeout=900,
        )
        label = stub.Label(
            gateway_pb2.LabelRequest(
                query="how does the virus spread",
                chunk="The virus spreads mainly between people in close contact.",
                answers=["between people in close contact"],
                mode=gateway_pb2.LABEL_MODE_DEBATE,
            ),
            metadata=metadata,
            timeout=900,
        )
        self.results["memory_requests"] = {
            "answer": common_pb2.Decision.Name(answer.decision),
            "answer_failed_stage": answer.failed_stage,
            "label_source": gateway_pb2.LabelSource.Name(label.source),
            "seconds": time.perf_counter() - started,
        }
        memory = ray_memory()
        memory["processes"] = [p for p in memory["processes"] if p["pss_mib"] >= 20]
        self.results["memory"] = memory
        print(
            f"  whole deployment: PSS {memory['total_pss_mib']:.0f} MiB, RSS "
            f"{memory['total_rss_mib']:.0f} MiB of {memory['machine_total_mib']:.0f} MiB",
            flush=True,
        )
        for row in memory["processes"][:12]:
            print(f"    {row['pss_mib']:7.0f} MiB PSS {row['rss_mib']:7.0f} RSS  {row['process']}")


def _trivial(
    target: str,
    metadata: tuple[tuple[str, str], ...],
    request: confidence_pb2.ScoreRequest,
    calls: int,
) -> tuple[list[float], float]:
    """Sequential latencies (ms) and 8-thread calls/s of ``Confidence.Score`` at ``target``."""
    with grpc.insecure_channel(target) as channel:
        stub = confidence_pb2_grpc.ConfidenceServiceStub(channel)

        def call(_: int = 0) -> Any:
            return stub.Score(request, metadata=metadata, timeout=30)

        for _ in range(20):
            call()  # warm-up
        latencies = []
        for _ in range(calls):
            started = time.perf_counter()
            call()
            latencies.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(call, range(calls)))
        return latencies, calls / (time.perf_counter() - started)


def _match_call(
    stub: Any, metadata: tuple[tuple[str, str], ...], questions: list[str], entry: Any
) -> Callable[[int], Outcome]:
    def call(index: int) -> Outcome:
        request = ensemble_pb2.MatchRequest(
            query=questions[index % len(questions)], candidate=entry
        )
        try:
            reply = stub.Match(request, metadata=metadata, timeout=300)
        except grpc.RpcError as exc:
            return Outcome(exc.code().name)
        return Outcome("OK", "match" if reply.match else "no")

    return call


def _scaling_log_lines() -> list[str]:
    logs = REPO / ".build" / "ray" / "session_latest" / "logs" / "serve"
    lines = []
    for path in sorted(logs.glob("controller_*.log")):
        for line in path.read_text(errors="replace").splitlines():
            if (
                re.search(r"[Uu]pscal|[Dd]ownscal|Adding \d+ replica|[Aa]utoscal.*ensemble", line)
                and "ensemble" in line
            ):
                try:
                    record = json.loads(line)
                    lines.append(f"{record.get('asctime')} {record.get('message')}")
                except json.JSONDecodeError:
                    lines.append(line[:300])
    return lines[-20:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--parts", default="proxy,throughput,batching,autoscale")
    parser.add_argument(
        "--levels", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32]
    )
    parser.add_argument("--min-requests", type=int, default=6)
    parser.add_argument("--level-seconds", type=float, default=240.0)
    parser.add_argument("--trivial-calls", type=int, default=300)
    parser.add_argument("--batch-requests", type=int, default=48)
    parser.add_argument("--batch-rounds", type=int, default=2)
    parser.add_argument("--autoscale-requests", type=int, default=80)
    parser.add_argument("--autoscale-seconds", type=float, default=90.0)
    parser.add_argument(
        "--entailment",
        choices=("model", "lexical"),
        default="model",
        help="the scenario's entailment fast checker (lexical: model-free, the judges alone "
        "carry the model load)",
    )
    parser.add_argument("--work", type=Path, default=REPO / ".build" / "bench" / "serve-work")
    parser.add_argument("--out", type=Path, default=REPO / ".build" / "bench" / "serve.json")
    args = parser.parse_args()
    parts = args.parts.split(",")
    bench = Bench(args)
    args.work.mkdir(parents=True, exist_ok=True)
    if parts == ["memory"]:
        judges = tuple(
            f"{m}/{p}"
            for m in ("llm_strong", "llm_weak", "llm_tiny")
            for p in ("ral2m", "ral2m-augmented")
        )
        calibrator = fit_synthetic_calibrator(args.work / "calibrator-tiny.json", judges=judges)
        overrides = {
            "data_dir": str(args.work / "data-memory"),
            "llm": {"n_threads": 1},
            "ensemble": {"aggregator": "majority"},
            "confidence": {"artifact_path": str(calibrator)},
            "gateway": {"candidates": 1},
        }
        settings = load_settings("tiny", **overrides)
        bench.results["scenario"] = (
            "tiny profile as shipped (transformers), per-service model copies"
        )
    else:
        calibrator = fit_synthetic_calibrator(args.work / "calibrator.json")
        overrides = scenario_overrides(
            args.work / "data", calibrator, entailment={"fast_backend": args.entailment}
        )
        settings = scenario_settings(overrides)
        bench.results["scenario"] = (
            "loadtest/scenario.py (135M model for every LLM role, llama.cpp), "
            f"entailment fast checker: {args.entailment}"
        )
    ingest_faq(settings, COVID / "faq_kb_en.jsonl", settings.gateway.collection)
    questions = covid_questions(COVID / "question_similarity_en.jsonl", 16, 11)
    bench.start(overrides, settings)
    try:
        for part in parts:
            print(f"== {part}", flush=True)
            if part == "memory":
                bench.memory()
            elif part == "proxy":
                bench.proxy()
            else:
                getattr(bench, part)(questions)
            bench.save()
    finally:
        bench.save()
        bench.stop()
    print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
