"""The service runtime on real gRPC servers: health, readiness, errors, metrics, shutdown."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)
from grpc_status import rpc_status
from tribunal.core import ServerSettings, Settings, load_embedder
from tribunal.core.server import ServiceHost
from tribunal.v1 import confidence_pb2, confidence_pb2_grpc

from tests.conftest import REPO
from tests.integration._test_service import binding

SERVICE = "tribunal.v1.ConfidenceService"


def _health(channel: grpc.Channel, service: str = "") -> int:
    stub = health_pb2_grpc.HealthStub(channel)
    return stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


def _score(channel: grpc.Channel, **extra: float) -> confidence_pb2.ScoreResponse:
    stub = confidence_pb2_grpc.ConfidenceServiceStub(channel)
    request = confidence_pb2.ScoreRequest(
        signals=confidence_pb2.Signals(ensemble_p_match=0.75, extra=extra)
    )
    return stub.Score(request, timeout=10)


@pytest.fixture
def start_host() -> Iterator[Callable[..., tuple[ServiceHost, grpc.Channel]]]:
    hosts: list[ServiceHost] = []
    channels: list[grpc.Channel] = []

    def start(
        name: str, loader: Callable[[], None] | None = None, **server: Any
    ) -> tuple[ServiceHost, grpc.Channel]:
        settings = ServerSettings(**{"port": 0, "metrics_port": None, **server})
        host = ServiceHost(settings, name=name, bindings=[binding()], loader=loader)
        port = host.start()
        hosts.append(host)
        channel = grpc.insecure_channel(f"127.0.0.1:{port}")
        channels.append(channel)
        return host, channel

    yield start
    for channel in channels:
        channel.close()
    for host in hosts:
        host.stop(0)


@pytest.mark.models
def test_health_turns_serving_only_after_a_real_model_load(
    tiny_settings: Settings, start_host: Callable[..., tuple[ServiceHost, grpc.Channel]]
) -> None:
    release = threading.Event()
    loaded: dict[str, Any] = {}

    def loader() -> None:
        release.wait(60)
        loaded["embedder"] = load_embedder(tiny_settings)

    host, channel = start_host("embedder-health", loader=loader)
    serving = health_pb2.HealthCheckResponse.SERVING
    not_serving = health_pb2.HealthCheckResponse.NOT_SERVING
    assert _health(channel) == not_serving
    assert _health(channel, SERVICE) == not_serving
    with pytest.raises(grpc.RpcError) as caught:
        _score(channel)
    assert caught.value.code() is grpc.StatusCode.UNAVAILABLE
    assert "still loading" in caught.value.details()

    release.set()
    assert host.wait_until_ready(120)
    assert _health(channel) == serving
    assert _health(channel, SERVICE) == serving
    vector = loaded["embedder"].encode(["health check"], normalize_embeddings=True)
    assert vector.shape == (1, 384)
    assert _score(channel).confidence == pytest.approx(0.75)


def test_a_failed_load_keeps_the_service_not_serving(
    start_host: Callable[..., tuple[ServiceHost, grpc.Channel]],
) -> None:
    def loader() -> None:
        raise FileNotFoundError("model.safetensors")

    host, channel = start_host("broken-load", loader=loader)
    assert not host.wait_until_ready(30)
    assert isinstance(host.load_error, FileNotFoundError)
    assert _health(channel) == health_pb2.HealthCheckResponse.NOT_SERVING


def test_invalid_argument_carries_message_and_field(
    start_host: Callable[..., tuple[ServiceHost, grpc.Channel]],
) -> None:
    host, channel = start_host("errors")
    assert host.wait_until_ready(10)
    with pytest.raises(grpc.RpcError) as caught:
        _score(channel, invalid=1.0)
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert caught.value.details() == "signal 'invalid' is not known"
    status = rpc_status.from_call(caught.value)
    assert status is not None
    bad_request = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad_request)
    assert bad_request.field_violations[0].field == "signals.extra"


def test_unexpected_exception_is_internal_and_sanitized(
    start_host: Callable[..., tuple[ServiceHost, grpc.Channel]],
) -> None:
    host, channel = start_host("crashes")
    assert host.wait_until_ready(10)
    with pytest.raises(grpc.RpcError) as caught:
        _score(channel, crash=1.0)
    assert caught.value.code() is grpc.StatusCode.INTERNAL
    assert "secret internal detail" not in caught.value.details()
    assert caught.value.details().startswith("internal error (id ")


def test_metrics_interceptor_counts_errors_by_code(
    start_host: Callable[..., tuple[ServiceHost, grpc.Channel]],
) -> None:
    host, channel = start_host("metered", metrics_port=0)
    assert host.wait_until_ready(10)
    _score(channel)
    for _ in range(2):
        with pytest.raises(grpc.RpcError):
            _score(channel, invalid=1.0)
    with pytest.raises(grpc.RpcError):
        _score(channel, crash=1.0)
    page = urllib.request.urlopen(f"http://127.0.0.1:{host.metrics_port}/metrics", timeout=5)
    text = page.read().decode()

    def count(code: str) -> float:
        prefix = f'tribunal_grpc_requests_total{{code="{code}",method="Score",service="metered"}} '
        lines = [line for line in text.splitlines() if line.startswith(prefix)]
        assert lines, f"no metric line for {code}"
        return float(lines[0].removeprefix(prefix))

    assert count("OK") == 1.0
    assert count("INVALID_ARGUMENT") == 2.0
    assert count("INTERNAL") == 1.0
    assert 'tribunal_grpc_latency_seconds_count{method="Score",service="metered"} 4.0' in text
    assert 'tribunal_service_ready{service="metered"} 1.0' in text


def test_oversized_message_is_refused(
    start_host: Callable[..., tuple[ServiceHost, grpc.Channel]],
) -> None:
    host, channel = start_host("limits", max_message_bytes=4096)
    assert host.wait_until_ready(10)
    with pytest.raises(grpc.RpcError) as caught:
        _score(channel, **{"x" * 8192: 1.0})
    assert caught.value.code() is grpc.StatusCode.RESOURCE_EXHAUSTED


def test_reflection_lists_the_services(
    start_host: Callable[..., tuple[ServiceHost, grpc.Channel]],
) -> None:
    _host, channel = start_host("reflected")
    services = set(ProtoReflectionDescriptorDatabase(channel).get_services())
    assert {SERVICE, "grpc.health.v1.Health"} <= services


def test_sigterm_lets_the_in_flight_call_finish() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration._test_service"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            grpc.channel_ready_future(channel).result(timeout=10)
            stub = confidence_pb2_grpc.ConfidenceServiceStub(channel)
            slow = stub.Score.future(
                confidence_pb2.ScoreRequest(
                    signals=confidence_pb2.Signals(ensemble_p_match=0.5, extra={"sleep": 1.5})
                ),
                timeout=20,
            )
            threading.Event().wait(0.5)
            process.send_signal(signal.SIGTERM)
            assert slow.result().confidence == pytest.approx(0.5)
        assert process.wait(timeout=20) == 0
    finally:
        if process.poll() is None:
            process.kill()
