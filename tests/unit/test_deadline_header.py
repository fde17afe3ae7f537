"""A call's deadline in ``tribunal-deadline-ms`` metadata: sent by Tribunal's channels,
read back by the gateway behind Ray Serve's proxy (which drops gRPC's own deadline)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from tribunal.core import InvalidArgumentError
from tribunal.core.server import DEADLINE_METADATA, deadline_from_metadata, open_channel


@pytest.fixture
def echo_metadata() -> Iterator[str]:
    """A real gRPC server on loopback that answers with the header it received."""

    def call(request: bytes, context: grpc.ServicerContext) -> bytes:
        values = [v for k, v in context.invocation_metadata() if k == DEADLINE_METADATA]
        return (values[0] if values else "absent").encode()

    def stream(request: bytes, context: grpc.ServicerContext) -> Iterator[bytes]:
        yield call(request, context)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers(
        (
            grpc.method_handlers_generic_handler(
                "test.Echo",
                {
                    "Call": grpc.unary_unary_rpc_method_handler(call),
                    "Stream": grpc.unary_stream_rpc_method_handler(stream),
                },
            ),
        )
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"127.0.0.1:{port}"
    finally:
        server.stop(0)


def test_tribunal_channels_send_the_time_left_with_every_call_that_has_one(
    echo_metadata: str,
) -> None:
    with open_channel(echo_metadata) as channel:
        unary = channel.unary_unary("/test.Echo/Call")
        assert unary(b"", timeout=5) == b"5000"
        assert unary(b"", timeout=0.25) == b"250"
        assert unary(b"") == b"absent"  # no deadline, no header
        # A caller's own header is replaced by the call's real timeout, not kept beside it.
        assert unary(b"", timeout=2, metadata=((DEADLINE_METADATA, "999999"),)) == b"2000"
        streamed = channel.unary_stream("/test.Echo/Stream")
        assert list(streamed(b"", timeout=3)) == [b"3000"]


def test_the_gateway_keeps_a_margin_for_the_way_back() -> None:
    assert deadline_from_metadata(()) is None
    assert deadline_from_metadata((("authorization", "Bearer x"),)) is None
    # 20 s less a quarter second and 5%.
    assert deadline_from_metadata(((DEADLINE_METADATA, "20000"),)) == pytest.approx(18.75)
    assert deadline_from_metadata(((DEADLINE_METADATA, b"2000"),)) == pytest.approx(1.65)
    # Under the margin: nothing left, never negative.
    assert deadline_from_metadata(((DEADLINE_METADATA, "100"),)) == 0.0
    waited = time.monotonic() - 1.0
    left = deadline_from_metadata(((DEADLINE_METADATA, "10000"),), received_at=waited)
    assert left is not None
    assert 8.2 < left <= 8.25


@pytest.mark.parametrize("value", ["", "abc", "0", "-5", "1.5", "3600001", "1e3", " 20"])
def test_a_malformed_deadline_header_is_invalid_argument(value: str) -> None:
    with pytest.raises(InvalidArgumentError, match=DEADLINE_METADATA) as caught:
        deadline_from_metadata(((DEADLINE_METADATA, value),))
    assert caught.value.field == DEADLINE_METADATA


def test_the_gateway_replica_reads_the_header_of_a_proxy_call() -> None:
    from tribunal.gateway.app import _ProxyDeadline

    class ProxyContext:
        """What Serve's proxy hands a replica: the call's metadata (a stand-in object)."""

        def __init__(self, metadata: list[tuple[str, Any]]) -> None:
            self._metadata = metadata

        def invocation_metadata(self) -> list[tuple[str, Any]]:
            return self._metadata

    remaining = _ProxyDeadline(ProxyContext([(DEADLINE_METADATA, "20000")])).time_remaining()
    assert remaining is not None
    assert 18.5 < remaining <= 18.75
    assert _ProxyDeadline(ProxyContext([])).time_remaining() is None
    assert _ProxyDeadline(None).time_remaining() is None
    with pytest.raises(InvalidArgumentError):
        _ProxyDeadline(ProxyContext([(DEADLINE_METADATA, "soon")]))
