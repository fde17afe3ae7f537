"""Admission control on a real gRPC server: undecodable requests, capacity, deadlines.

The servicer is a real ``tribunal.v1.ConfidenceService`` whose ``Score`` works in
10 ms steps (``extra["steps"]``), checking the request's deadline between steps as
long-running domain code does, and records how many steps each call ran.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tribunal.core import ServerSettings, check_deadline, load_settings
from tribunal.core.server import RequestLimits, ServiceBinding, ServiceHost
from tribunal.v1 import confidence_pb2, confidence_pb2_grpc

METHOD = "/tribunal.v1.ConfidenceService/Score"


class SteppingConfidence(confidence_pb2_grpc.ConfidenceServiceServicer):
    def __init__(self) -> None:
        self.steps_run: list[int] = []
        self.started = 0
        self._lock = threading.Lock()

    def Score(
        self, request: confidence_pb2.ScoreRequest, context: grpc.ServicerContext
    ) -> confidence_pb2.ScoreResponse:
        with self._lock:
            self.started += 1
        done = 0
        try:
            for _ in range(int(request.signals.extra.get("steps", 0))):
                check_deadline("a step")
                time.sleep(0.01)
                done += 1
        finally:
            with self._lock:
                self.steps_run.append(done)
        return confidence_pb2.ScoreResponse(confidence=0.5, calibrator_version="steps")


@pytest.fixture
def served() -> Iterator[tuple[SteppingConfidence, grpc.Channel, ServiceHost]]:
    servicer = SteppingConfidence()
    host = ServiceHost(
        ServerSettings(port=0, metrics_port=None, max_ongoing_requests=2, max_queued_requests=2),
        name="stepping",
        bindings=[
            ServiceBinding(
                "tribunal.v1.ConfidenceService",
                lambda server: confidence_pb2_grpc.add_ConfidenceServiceServicer_to_server(
                    servicer, server
                ),
            )
        ],
        request_limits=RequestLimits.from_settings(load_settings()),
    )
    port = host.start()
    assert host.wait_until_ready(10)
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield servicer, channel, host
    finally:
        channel.close()
        host.stop(0)


def _score(channel: grpc.Channel, steps: int, timeout: float = 30) -> grpc.StatusCode:
    stub = confidence_pb2_grpc.ConfidenceServiceStub(channel)
    request = confidence_pb2.ScoreRequest(signals=confidence_pb2.Signals(extra={"steps": steps}))
    try:
        stub.Score(request, timeout=timeout)
    except grpc.RpcError as exc:
        return exc.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_random_bytes_are_invalid_argument(
    served: tuple[SteppingConfidence, grpc.Channel, ServiceHost],
) -> None:
    servicer, channel, _ = served
    raw = channel.unary_unary(METHOD)  # no serializer: the bytes go as they are
    for payload in (b"\xff\xff\xff\xff", b"\x0a\x05\xc3\x28abc", bytes(range(256))):
        with pytest.raises(grpc.RpcError) as caught:
            raw(payload, timeout=5)
        assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        assert "not a valid tribunal.v1.ScoreRequest" in caught.value.details()
    assert servicer.started == 0


def test_an_oversize_field_is_refused_before_work(
    served: tuple[SteppingConfidence, grpc.Channel, ServiceHost],
) -> None:
    servicer, channel, _ = served
    stub = confidence_pb2_grpc.ConfidenceServiceStub(channel)
    with pytest.raises(grpc.RpcError) as caught:
        stub.Score(confidence_pb2.ScoreRequest(item_id="x" * 129), timeout=5)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "server.max_id_chars" in caught.value.details()
    assert servicer.started == 0


def test_beyond_slots_and_queue_calls_are_refused_at_once(
    served: tuple[SteppingConfidence, grpc.Channel, ServiceHost],
) -> None:
    servicer, channel, host = served
    with ThreadPoolExecutor(max_workers=4) as pool:
        # 2 slots + 2 queued: four 1-second calls fill the service.
        busy = [pool.submit(_score, channel, 100) for _ in range(4)]
        deadline = time.monotonic() + 10
        while host.admission.ongoing + host.admission.queued < 4:
            assert time.monotonic() < deadline, "the calls never arrived"
            time.sleep(0.01)
        started = time.perf_counter()
        assert _score(channel, 1) is grpc.StatusCode.RESOURCE_EXHAUSTED
        refused_in = time.perf_counter() - started
        # Health still answers while every slot is busy.
        health = health_pb2_grpc.HealthStub(channel)
        reply = health.Check(health_pb2.HealthCheckRequest(), timeout=2)
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
        assert [f.result() for f in busy] == [grpc.StatusCode.OK] * 4
    assert refused_in < 0.1, f"refused after {refused_in:.3f} s"
    assert servicer.started == 4


def test_a_call_whose_deadline_passes_in_the_queue_never_starts(
    served: tuple[SteppingConfidence, grpc.Channel, ServiceHost],
) -> None:
    servicer, channel, host = served
    with ThreadPoolExecutor(max_workers=3) as pool:
        busy = [pool.submit(_score, channel, 50) for _ in range(2)]
        while host.admission.ongoing < 2:
            time.sleep(0.01)
        assert _score(channel, 1, timeout=0.1) is grpc.StatusCode.DEADLINE_EXCEEDED
        assert [f.result() for f in busy] == [grpc.StatusCode.OK] * 2
    assert servicer.started == 2


def test_work_is_abandoned_when_its_deadline_passes(
    served: tuple[SteppingConfidence, grpc.Channel, ServiceHost],
) -> None:
    servicer, channel, host = served
    started = time.perf_counter()
    assert _score(channel, 1_000, timeout=0.3) is grpc.StatusCode.DEADLINE_EXCEEDED
    assert time.perf_counter() - started < 1.0
    deadline = time.monotonic() + 5
    while not servicer.steps_run:  # the work stops at its next deadline check
        assert time.monotonic() < deadline, "the abandoned work never stopped"
        time.sleep(0.01)
    assert servicer.steps_run[0] < 100, servicer.steps_run
    assert host.admission.ongoing == 0
    # A 1 ms deadline: refused or abandoned, never an error of the server.
    assert _score(channel, 5, timeout=0.001) is grpc.StatusCode.DEADLINE_EXCEEDED
