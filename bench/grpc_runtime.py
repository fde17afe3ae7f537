"""Overhead of the service runtime: calls/s through ServiceHost vs a bare grpc.server.

Both servers run the same trivial servicer side by side in one run, on
loopback, with the same client threads; the figure is the ratio (machines
here are shared and noisy, so absolute rates are not compared across runs).

    .venv/bin/python bench/grpc_runtime.py [--calls 2000] [--threads 4]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tribunal.core import ServerSettings
from tribunal.core.server import ServiceHost
from tribunal.v1 import confidence_pb2, confidence_pb2_grpc

from tests.integration._test_service import SteeredConfidence, binding


def _rate(port: int, calls: int, threads: int) -> float:
    request = confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(ensemble_p_match=0.5))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = confidence_pb2_grpc.ConfidenceServiceStub(channel)
        stub.Score(request, timeout=10)  # warm up the connection
        started = time.perf_counter()
        with futures.ThreadPoolExecutor(threads) as pool:
            list(pool.map(lambda _: stub.Score(request, timeout=10), range(calls)))
        return calls / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    bare = grpc.server(futures.ThreadPoolExecutor(16))
    confidence_pb2_grpc.add_ConfidenceServiceServicer_to_server(SteeredConfidence(), bare)
    bare_port = bare.add_insecure_port("127.0.0.1:0")
    bare.start()
    host = ServiceHost(
        ServerSettings(port=0, metrics_port=None), name="bench", bindings=[binding()]
    )
    host_port = host.start()
    host.wait_until_ready(10)

    ratios = []
    for round_ in range(args.rounds):
        # Alternate the order so drift on a shared machine does not favour one side.
        if round_ % 2 == 0:
            plain, hosted = (
                _rate(bare_port, args.calls, args.threads),
                _rate(host_port, args.calls, args.threads),
            )
        else:
            hosted, plain = (
                _rate(host_port, args.calls, args.threads),
                _rate(bare_port, args.calls, args.threads),
            )
        ratios.append(hosted / plain)
        print(f"round {round_ + 1}: bare {plain:8.0f} calls/s   ServiceHost {hosted:8.0f} calls/s")
    host.stop(0)
    bare.stop(0)
    print(
        f"ServiceHost / bare grpc.server throughput: median {statistics.median(ratios):.2f} "
        f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)}; {args.calls} calls x "
        f"{args.threads} client threads)"
    )


if __name__ == "__main__":
    main()
