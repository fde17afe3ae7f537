"""Tribunal's client channel sends ``Answer`` again on UNAVAILABLE, within the deadline,
and nothing else: a real gRPC server that is unavailable for its first calls."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from tribunal.core.server import RETRIED_READS, open_channel, retry_service_config

ANSWER = "/tribunal.v1.GatewayService/Answer"
LABEL = "/tribunal.v1.GatewayService/Label"


class _Flaky:
    """Answers UNAVAILABLE to the first ``failures`` calls of each method, then echoes."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls: dict[str, int] = {}
        self._lock = threading.Lock()

    def handler(self, method: str) -> grpc.RpcMethodHandler:
        def serve(request: bytes, context: grpc.ServicerContext) -> bytes:
            with self._lock:
                self.calls[method] = self.calls.get(method, 0) + 1
                count = self.calls[method]
            if count <= self.failures:
                context.abort(grpc.StatusCode.UNAVAILABLE, "replica stopping")
            return request

        return grpc.unary_unary_rpc_method_handler(serve)


@pytest.fixture
def flaky() -> Iterator[tuple[str, _Flaky]]:
    state = _Flaky(failures=2)

    class _Handler(grpc.GenericRpcHandler):
        def service(self, details: Any) -> grpc.RpcMethodHandler | None:
            return state.handler(details.method)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((_Handler(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}", state
    finally:
        server.stop(0)


def _call(channel: grpc.Channel, method: str, timeout: float = 10.0) -> bytes:
    stub = channel.unary_unary(method)
    reply: bytes = stub(b"ping", timeout=timeout)
    return reply


def test_answer_is_sent_again_until_a_replica_answers(flaky: tuple[str, _Flaky]) -> None:
    address, state = flaky
    with open_channel(address, retried=RETRIED_READS) as channel:
        assert _call(channel, ANSWER) == b"ping"
    assert state.calls[ANSWER] == 3  # two UNAVAILABLE, then the answer


def test_a_bare_channel_and_other_methods_are_not_retried(flaky: tuple[str, _Flaky]) -> None:
    address, state = flaky
    with open_channel(address) as channel, pytest.raises(grpc.RpcError) as bare:
        _call(channel, ANSWER)
    assert bare.value.code() == grpc.StatusCode.UNAVAILABLE
    with (
        open_channel(address, retried=RETRIED_READS) as channel,
        pytest.raises(grpc.RpcError) as label,
    ):
        _call(channel, LABEL)  # may queue an item for review: never sent twice
    assert label.value.code() == grpc.StatusCode.UNAVAILABLE
    assert state.calls == {ANSWER: 1, LABEL: 1}


def test_retries_stay_within_the_deadline(flaky: tuple[str, _Flaky]) -> None:
    address, state = flaky
    state.failures = 1000  # never available
    started = time.monotonic()
    with (
        open_channel(address, retried=RETRIED_READS) as channel,
        pytest.raises(grpc.RpcError) as failed,
    ):
        _call(channel, ANSWER, timeout=1.0)
    took = time.monotonic() - started
    # Five tries with backoff 0.2 s doubling (jittered) fit in 1 s or are cut by it.
    assert failed.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert took < 1.5
    assert 2 <= state.calls[ANSWER] <= 5


def test_the_service_config_names_each_method_and_refuses_a_partial_name() -> None:
    config = json.loads(retry_service_config([ANSWER]))
    (method,) = config["methodConfig"]
    assert method["name"] == [{"service": "tribunal.v1.GatewayService", "method": "Answer"}]
    assert method["retryPolicy"]["retryableStatusCodes"] == ["UNAVAILABLE"]
    assert method["retryPolicy"]["maxAttempts"] == 5
    with pytest.raises(ValueError, match="is not a full method name"):
        retry_service_config(["Answer"])
