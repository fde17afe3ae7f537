"""The load generator's arithmetic and scheduling, without a server (tests/integration/
test_serve_loadtest.py drives a real gateway): seeded Poisson arrivals, hard caps, the
loopback rule, and open-loop latency that counts queueing from the intended send time."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from loadtest import (
    MAX_DURATION_S,
    MAX_REQUESTS,
    Outcome,
    check_loopback,
    percentile,
    plot,
    poisson_arrivals,
    run_closed,
    run_open,
    summarize,
)


def test_poisson_arrivals_are_seeded_exponential_gaps_at_the_rate() -> None:
    times = poisson_arrivals(rate=50.0, count=20_000, duration_s=3_000.0, seed=7)
    assert times == poisson_arrivals(rate=50.0, count=20_000, duration_s=3_000.0, seed=7)
    assert times != poisson_arrivals(rate=50.0, count=20_000, duration_s=3_000.0, seed=8)
    gaps = np.diff([0.0, *times])
    assert len(times) == 20_000
    assert np.all(gaps > 0)
    assert gaps.mean() == pytest.approx(1 / 50.0, rel=0.03)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, rel=0.05)  # exponential: CV = 1
    assert stats.kstest(gaps, "expon", args=(0, 1 / 50.0)).pvalue > 0.01


def test_poisson_arrivals_stop_at_the_count_or_the_duration() -> None:
    assert len(poisson_arrivals(rate=100.0, count=30, duration_s=1_000.0, seed=0)) == 30
    short = poisson_arrivals(rate=100.0, count=10_000, duration_s=2.0, seed=0)
    assert short[-1] <= 2.0
    assert 150 < len(short) < 250


@pytest.mark.parametrize(
    ("rate", "count", "duration"),
    [
        (0.0, 10, 1.0),
        (-1.0, 10, 1.0),
        (1.0, 0, 1.0),
        (1.0, MAX_REQUESTS + 1, 1.0),
        (1.0, 10, 0.0),
        (1.0, 10, MAX_DURATION_S + 1),
    ],
)
def test_runs_are_bounded(rate: float, count: int, duration: float) -> None:
    with pytest.raises(ValueError, match=r"rate|count|duration"):
        poisson_arrivals(rate=rate, count=count, duration_s=duration, seed=0)


def test_percentile_matches_numpy_and_is_nan_when_empty() -> None:
    values = [float(v) for v in np.random.default_rng(1).gamma(2.0, 30.0, 999)]
    for q in (50, 95, 99):
        assert percentile(values, q) == pytest.approx(np.percentile(values, q))
    assert np.isnan(percentile([], 50))


@pytest.mark.parametrize("target", ["127.0.0.1:9000", "localhost:50051", "[::1]:9000"])
def test_loopback_targets_are_accepted(target: str) -> None:
    host, port = check_loopback(target)
    assert port in (9000, 50051)
    assert host


@pytest.mark.parametrize(
    ("target", "why"),
    [
        ("10.0.0.5:9000", "not loopback"),
        ("8.8.8.8:443", "not loopback"),
        ("127.0.0.1", "host:port"),
        ("127.0.0.1:0", "not in 1..65535"),
        ("no-such-host.invalid:9000", "does not resolve"),
    ],
)
def test_other_targets_are_refused_with_the_reason(target: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        check_loopback(target)


class _OneServer:
    """A server that serves one request at a time, each taking ``service_s``."""

    def __init__(self, service_s: float) -> None:
        self.service_s = service_s
        self.lock = threading.Lock()
        self.in_flight = 0
        self.max_in_flight = 0
        self.count_lock = threading.Lock()

    def __call__(self, index: int) -> Outcome:
        with self.count_lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        with self.lock:
            time.sleep(self.service_s)
        with self.count_lock:
            self.in_flight -= 1
        return Outcome("OK", "ACCEPT" if index % 2 else "FALLBACK")


def test_open_loop_counts_queueing_from_the_intended_send_time() -> None:
    # Offered 100/s against a server that does 50/s: the queue grows, and so must latency.
    server = _OneServer(service_s=0.02)
    samples, wall = run_open(server, rate=100.0, requests=60, duration_s=30.0, seed=3)
    assert [s.index for s in samples] == list(range(60))
    assert all(s.code == "OK" for s in samples)
    latencies = [s.latency_s for s in samples]
    # Sixty 20 ms services take >= 1.2 s; the last arrival is due at ~0.6 s, so it waited.
    assert wall >= 60 * 0.02
    assert max(latencies) > 0.4
    assert np.mean(latencies[-10:]) > 3 * np.mean(latencies[:10])
    # The clients did not serialize behind the server: they sent on schedule.
    assert max(s.sent_s - s.intended_s for s in samples) < 0.2
    assert server.max_in_flight > 5


def test_closed_loop_hides_that_queue_behind_its_own_clients() -> None:
    server = _OneServer(service_s=0.02)
    samples, wall = run_closed(server, concurrency=1, requests=20, duration_s=30.0)
    assert len(samples) == 20
    assert server.max_in_flight == 1
    assert max(s.latency_s for s in samples) < 0.2  # one client never queues
    summary = summarize(samples, wall, {"method": "Answer", "mode": "closed", "concurrency": 1})
    assert summary["ok"] == 20
    assert summary["throughput_rps"] == pytest.approx(20 / wall)
    assert summary["decisions"] == {"FALLBACK": 10, "ACCEPT": 10}


def test_closed_loop_keeps_n_clients_busy_and_stops_at_the_count() -> None:
    started = threading.Semaphore(0)

    def call(index: int) -> Outcome:
        started.release()
        time.sleep(0.05)
        return Outcome("OK") if index % 5 else Outcome("UNAVAILABLE")

    samples, _ = run_closed(call, concurrency=4, requests=23, duration_s=30.0)
    assert len(samples) == 23
    summary = summarize(samples, 1.0, {"mode": "closed", "concurrency": 4})
    assert summary["errors_by_code"] == {"UNAVAILABLE": 5}
    assert summary["ok"] == 18


def test_open_loop_records_unfinished_calls_as_client_timeouts(tmp_path: Path) -> None:
    def call(index: int) -> Outcome:
        time.sleep(1.0 if index == 2 else 0.0)
        return Outcome("OK")

    samples, wall = run_open(call, rate=50.0, requests=5, duration_s=10.0, seed=0, drain_s=0.2)
    assert [s.code for s in samples].count("CLIENT_TIMEOUT") == 1
    assert samples[2].code == "CLIENT_TIMEOUT"
    summary = summarize(samples, wall, {"method": "Answer", "mode": "open", "rate": 50.0})
    assert summary["errors_by_code"] == {"CLIENT_TIMEOUT": 1}
    plot(summary, tmp_path / "latency.png")
    assert (tmp_path / "latency.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_raising_call_is_a_failed_request_not_a_crashed_run() -> None:
    def call(index: int) -> Outcome:
        raise RuntimeError("bug")

    samples, _ = run_closed(call, concurrency=2, requests=4, duration_s=5.0)
    assert {s.code for s in samples} == {"CLIENT_ERROR:RuntimeError"}
