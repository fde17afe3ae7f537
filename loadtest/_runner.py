"""Closed- and open-loop drivers over any blocking call; one :class:`Sample` per request.

A *call* is ``call(index) -> outcome`` (a status code name and a decision
name): the gRPC clients in :mod:`._grpc` are calls, and so is any function,
which keeps the scheduling testable without a server.

- **Closed loop**: ``concurrency`` workers, each sending its next request when
  the previous one returns. Throughput under a fixed number of users; the
  server's queueing slows the clients down, so latency alone hides it.
- **Open loop**: requests are due at Poisson arrival times whatever the server
  does; each one's latency runs from its *intended* send time, so time spent
  waiting (for a client thread, or in the server's queue) is counted, not
  hidden (the "coordinated omission" a closed loop suffers from).

Both stop at ``requests`` or ``duration_s``, whichever is first; requests not
finished ``drain_s`` after the end are recorded as ``CLIENT_TIMEOUT``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ._schedule import _bounded, poisson_arrivals

__all__ = ["Outcome", "Sample", "run_closed", "run_open"]


@dataclass(frozen=True)
class Outcome:
    """What one call returned: a status code name (``OK``…) and a decision (or "")."""

    code: str
    decision: str = ""


@dataclass(frozen=True)
class Sample:
    """One request: when it was due and sent, how long it took from when it was due."""

    index: int
    intended_s: float
    """Seconds from the run's start at which it was due (closed loop: when it was sent)."""
    sent_s: float
    """When a client thread actually sent it (>= intended in an open loop)."""
    latency_s: float
    """From the intended time to completion."""
    code: str
    decision: str


Call = Callable[[int], Outcome]


def _timed(call: Call, index: int, start: float, intended: float) -> Sample:
    sent = time.perf_counter() - start
    try:
        outcome = call(index)
    except Exception as exc:  # a client bug is a failed request, not a crashed run
        outcome = Outcome(f"CLIENT_ERROR:{type(exc).__name__}")
    done = time.perf_counter() - start
    return Sample(index, intended, sent, done - intended, outcome.code, outcome.decision)


def run_closed(
    call: Call, *, concurrency: int, requests: int, duration_s: float
) -> tuple[list[Sample], float]:
    """``concurrency`` workers back to back; the samples and the run's wall time."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be >= 1, got {concurrency}")
    requests, duration_s = _bounded(requests, duration_s)
    lock = threading.Lock()
    issued = 0
    samples: list[Sample] = []
    start = time.perf_counter()

    def worker() -> None:
        nonlocal issued
        while True:
            with lock:
                now = time.perf_counter() - start
                if issued >= requests or now >= duration_s:
                    return
                index = issued
                issued += 1
            sample = _timed(call, index, start, now)
            with lock:
                samples.append(sample)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sorted(samples, key=lambda s: s.index), time.perf_counter() - start


def run_open(
    call: Call,
    *,
    rate: float,
    requests: int,
    duration_s: float,
    seed: int = 0,
    max_in_flight: int = 256,
    drain_s: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[list[Sample], float]:
    """Poisson arrivals at ``rate``/s; latency from the intended send time.

    ``max_in_flight`` client threads send; when all are busy a due request waits
    for one, and that wait counts in its latency (the client is part of the
    system under test, never a reason to under-report).
    """
    schedule = poisson_arrivals(rate, requests, duration_s, seed)
    samples: dict[int, Sample] = {}
    lock = threading.Lock()
    pool = ThreadPoolExecutor(max_workers=max_in_flight, thread_name_prefix="loadtest")
    start = time.perf_counter()

    def one(index: int, intended: float) -> None:
        sample = _timed(call, index, start, intended)
        with lock:
            samples[index] = sample

    try:
        for index, intended in enumerate(schedule):
            delay = intended - (time.perf_counter() - start)
            if delay > 0:
                sleep(delay)
            pool.submit(one, index, intended)
        end_of_schedule = time.perf_counter() - start
        pool.shutdown(wait=False)
        deadline = time.perf_counter() + drain_s
        while time.perf_counter() < deadline:
            with lock:
                if len(samples) == len(schedule):
                    break
            time.sleep(0.01)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    wall = time.perf_counter() - start
    with lock:
        for index, intended in enumerate(schedule):
            if index not in samples:
                samples[index] = Sample(
                    index, intended, end_of_schedule, wall - intended, "CLIENT_TIMEOUT", ""
                )
        ordered = [samples[i] for i in range(len(schedule))]
    return ordered, wall
