"""Load generator for the gateway's ``Answer`` and ``Label`` over gRPC (loopback only).

Closed loop (N concurrent clients back to back) or open loop (Poisson arrivals
at a target rate, latency measured from each request's intended send time),
bounded in requests and time; a JSON summary (throughput, p50/p95/p99, errors by
code, decisions) and a latency-over-time PNG. ``python -m loadtest --help``.
"""

from ._cli import build_parser, main, run
from ._grpc import DEFAULT_ITEMS, DEFAULT_QUERIES, GatewayClient, LabelItem, read_inputs
from ._report import plot, summarize, write
from ._runner import Outcome, Sample, run_closed, run_open
from ._schedule import MAX_DURATION_S, MAX_REQUESTS, check_loopback, percentile, poisson_arrivals

__all__ = [
    "DEFAULT_ITEMS",
    "DEFAULT_QUERIES",
    "MAX_DURATION_S",
    "MAX_REQUESTS",
    "GatewayClient",
    "LabelItem",
    "Outcome",
    "Sample",
    "build_parser",
    "check_loopback",
    "main",
    "percentile",
    "plot",
    "poisson_arrivals",
    "read_inputs",
    "run",
    "run_closed",
    "run_open",
    "summarize",
    "write",
]
