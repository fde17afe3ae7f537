"""``python -m loadtest``: one bounded run against a loopback gateway, JSON + PNG out."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ._grpc import GatewayClient, LabelItem, read_inputs
from ._report import summarize, write
from ._runner import run_closed, run_open
from ._schedule import MAX_DURATION_S, MAX_REQUESTS, check_loopback

__all__ = ["build_parser", "main", "run"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m loadtest",
        description="Drive the gateway's Answer or Label over gRPC on this machine.",
    )
    parser.add_argument("--target", default="127.0.0.1:9000", help="host:port (loopback only)")
    parser.add_argument(
        "--application",
        default="gateway",
        help="Serve application metadata (Serve's gRPC proxy); '' when calling a gateway directly",
    )
    parser.add_argument("--method", choices=("Answer", "Label"), default="Answer")
    parser.add_argument("--mode", choices=("closed", "open"), default="closed")
    parser.add_argument("--concurrency", type=int, default=8, help="closed loop: clients")
    parser.add_argument("--rate", type=float, default=2.0, help="open loop: requests/s (Poisson)")
    parser.add_argument(
        "--requests", type=int, default=100, help=f"at most this many (cap {MAX_REQUESTS})"
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=60.0,
        help=f"at most this long, s (cap {MAX_DURATION_S:.0f})",
    )
    parser.add_argument("--seed", type=int, default=0, help="open loop: arrival seed")
    parser.add_argument("--timeout", type=float, default=120.0, help="per-call deadline, s")
    parser.add_argument("--inputs", type=Path, help="queries (Answer) or JSONL items (Label)")
    parser.add_argument("--collection", default="", help="Answer: KB collection")
    parser.add_argument(
        "--token-env", default="", help="environment variable holding a bearer token to send"
    )
    parser.add_argument(
        "--tls-dir",
        type=Path,
        default=None,
        help="mutual TLS with the files tribunal serve deploy writes (make serve: "
        ".build/ray/tls); omit for a plaintext target",
    )
    parser.add_argument("--out", type=Path, default=Path(".build/loadtest/run.json"))
    parser.add_argument("--png", type=Path, help="plot path (default: --out with .png)")
    return parser


def run(args: argparse.Namespace) -> dict[str, Any]:
    """One run as ``args`` describe it; the summary (also written to ``args.out``)."""
    check_loopback(args.target)
    inputs = read_inputs(args.inputs, args.method)
    client = GatewayClient(
        args.target,
        application=args.application or None,
        token=os.environ.get(args.token_env) if args.token_env else None,
        timeout_s=args.timeout,
        collection=args.collection,
        tls_dir=args.tls_dir,
    )
    try:
        if args.method == "Answer":
            call = client.answer_call([str(q) for q in inputs])
        else:
            call = client.label_call([i for i in inputs if isinstance(i, LabelItem)])
        setup: dict[str, Any] = {
            "method": args.method,
            "mode": args.mode,
            "target": args.target,
            "application": args.application,
        }
        if args.mode == "closed":
            samples, wall = run_closed(
                call, concurrency=args.concurrency, requests=args.requests, duration_s=args.duration
            )
            setup["concurrency"] = args.concurrency
        else:
            samples, wall = run_open(
                call,
                rate=args.rate,
                requests=args.requests,
                duration_s=args.duration,
                seed=args.seed,
                drain_s=args.timeout,
            )
            setup.update(rate=args.rate, seed=args.seed)
    finally:
        client.close()
    summary = summarize(samples, wall, setup)
    write(summary, args.out, args.png or args.out.with_suffix(".png"))
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        summary = run(args)
    except ValueError as exc:
        print(f"loadtest: error: {exc}", file=sys.stderr)
        return 2
    latency = summary["latency_ms"]
    print(
        f"{summary['method']} {summary['mode']}: {summary['ok']}/{summary['requests']} OK, "
        f"{summary['throughput_rps']:.2f} req/s, p50 {latency['p50']:.0f} ms, "
        f"p95 {latency['p95']:.0f} ms, p99 {latency['p99']:.0f} ms; errors "
        f"{summary['errors_by_code'] or 'none'}; decisions {summary['decisions']} -> {args.out}"
    )
    return 0
