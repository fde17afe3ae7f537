"""Summary (JSON) and the latency-over-time plot (PNG) of one run."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._runner import Sample
from ._schedule import percentile

__all__ = ["plot", "summarize", "write"]


def summarize(samples: Sequence[Sample], wall_s: float, setup: Mapping[str, Any]) -> dict[str, Any]:
    """Throughput, latency percentiles (ms, successful calls), errors by code, decisions."""
    ok = [s for s in samples if s.code == "OK"]
    latencies = [s.latency_s * 1000.0 for s in ok]
    lag = [(s.sent_s - s.intended_s) * 1000.0 for s in samples]
    return {
        **setup,
        "requests": len(samples),
        "ok": len(ok),
        "errors_by_code": dict(Counter(s.code for s in samples if s.code != "OK")),
        "decisions": dict(Counter(s.decision for s in ok)),
        "wall_s": wall_s,
        "throughput_rps": len(ok) / wall_s if wall_s > 0 else 0.0,
        "offered_rps": len(samples) / samples[-1].intended_s
        if len(samples) > 1 and samples[-1].intended_s > 0
        else None,
        "latency_ms": {
            "p50": percentile(latencies, 50),
            "p95": percentile(latencies, 95),
            "p99": percentile(latencies, 99),
            "mean": sum(latencies) / len(latencies) if latencies else float("nan"),
            "max": max(latencies, default=float("nan")),
        },
        "client_send_lag_ms_p99": percentile(lag, 99),
        "samples": [
            [round(s.intended_s, 4), round(s.latency_s * 1000.0, 2), s.code, s.decision]
            for s in samples
        ],
    }


def plot(summary: Mapping[str, Any], path: Path) -> None:
    """Latency of every request against its intended send time, errors marked, p50/p99 lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = summary["samples"]
    ok = [(t, ms) for t, ms, code, _ in rows if code == "OK"]
    failed = [(t, ms) for t, ms, code, _ in rows if code != "OK"]
    fig, ax = plt.subplots(figsize=(8, 4.2), dpi=110)
    if ok:
        ax.scatter([t for t, _ in ok], [ms for _, ms in ok], s=8, alpha=0.6, label="OK")
    if failed:
        times, values = [t for t, _ in failed], [ms for _, ms in failed]
        ax.scatter(times, values, s=14, marker="x", color="red", label="error")
    for q, style in (("p50", "--"), ("p99", ":")):
        value = summary["latency_ms"][q]
        if not math.isnan(value):
            ax.axhline(value, linestyle=style, color="gray", label=f"{q} {value:.0f} ms")
    load = (
        f"closed loop, {summary['concurrency']} clients"
        if summary.get("mode") == "closed"
        else f"open loop, Poisson {summary.get('rate')}/s"
    )
    ax.set_title(
        f"{summary.get('method')} {load}: {summary['throughput_rps']:.2f} req/s, "
        f"{summary['ok']}/{summary['requests']} OK"
    )
    ax.set_xlabel("intended send time (s from start)")
    ax.set_ylabel("latency from intended send (ms)")
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def write(summary: Mapping[str, Any], out: Path, png: Path | None) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(summary, indent=2, allow_nan=True))
    if png is not None:
        plot(summary, png)
