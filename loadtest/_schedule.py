"""Arrival schedules, percentiles and the loopback rule: the load test's arithmetic."""

from __future__ import annotations

import ipaddress
import math
import socket

import numpy as np

__all__ = [
    "MAX_DURATION_S",
    "MAX_REQUESTS",
    "check_loopback",
    "percentile",
    "poisson_arrivals",
]

MAX_REQUESTS = 100_000
"""Hard cap on requests in one run, whatever is asked."""
MAX_DURATION_S = 3_600.0
"""Hard cap on one run's length, in seconds."""


def poisson_arrivals(rate: float, count: int, duration_s: float, seed: int) -> list[float]:
    """Intended send times (seconds from the start) of a Poisson process at ``rate`` per second.

    Inter-arrival gaps are exponential with mean ``1 / rate`` (seeded); the
    schedule stops at ``count`` arrivals or at ``duration_s``, whichever is first.
    """
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"rate must be a positive number of requests per second, got {rate}")
    count, duration_s = _bounded(count, duration_s)
    rng = np.random.default_rng(seed)
    times: list[float] = []
    now = 0.0
    while len(times) < count:
        # Draw in blocks: a long schedule stays fast.
        for gap in rng.exponential(1.0 / rate, size=min(4096, count)):
            now += float(gap)
            if now > duration_s or len(times) >= count:
                return times
            times.append(now)
    return times


def _bounded(count: int, duration_s: float) -> tuple[int, float]:
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    if not (duration_s > 0):
        raise ValueError(f"duration must be > 0 seconds, got {duration_s}")
    if count > MAX_REQUESTS:
        raise ValueError(f"count {count} is over the cap of {MAX_REQUESTS} requests per run")
    if duration_s > MAX_DURATION_S:
        raise ValueError(f"duration {duration_s}s is over the cap of {MAX_DURATION_S:.0f}s")
    return count, duration_s


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0-100), linear interpolation (numpy's default); NaN if empty."""
    if not values:
        return float("nan")
    return float(np.percentile(np.asarray(values, dtype=np.float64), q))


def check_loopback(target: str) -> tuple[str, int]:
    """``host:port`` of a loopback server, or ValueError: the load test never leaves this machine.

    Every address the host name resolves to must be loopback (127.0.0.0/8 or ::1),
    so a name that also resolves elsewhere is refused too.
    """
    host, sep, port_text = target.rpartition(":")
    if not sep or not port_text.isdigit() or not host:
        raise ValueError(f"target {target!r} must be host:port, e.g. 127.0.0.1:9000")
    host = host.strip("[]")
    port = int(port_text)
    if not 0 < port < 65536:
        raise ValueError(f"target port {port} is not in 1..65535")
    try:
        addresses = {str(info[4][0]) for info in socket.getaddrinfo(host, port)}
    except socket.gaierror as exc:
        raise ValueError(f"target host {host!r} does not resolve: {exc}") from exc
    outside = sorted(a for a in addresses if not ipaddress.ip_address(a.split("%")[0]).is_loopback)
    if outside or not addresses:
        raise ValueError(
            f"refusing target {target!r}: it resolves to {outside or 'nothing'}, not loopback. "
            "The load generator only drives servers on this machine (127.0.0.1, ::1, localhost)."
        )
    return host, port
