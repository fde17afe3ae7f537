"""Bearer-token check on every Tribunal method (health and reflection stay open for probes)."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

import grpc

from ._metrics import GRPC_REQUESTS

__all__ = ["BearerTokenInterceptor"]

_OPEN_PREFIXES = ("/grpc.health.", "/grpc.reflection.")


class BearerTokenInterceptor(grpc.ServerInterceptor):  # type: ignore[misc,type-arg]
    """Refuses calls without ``authorization: Bearer <token>`` with UNAUTHENTICATED.

    Compares in constant time. Kubernetes probes reach ``grpc.health.v1`` without
    a token, so health and reflection are exempt.
    """

    def __init__(self, service: str, token: str) -> None:
        if not token:
            raise ValueError("an empty bearer token would accept everyone")
        self.service = service
        self._expected = f"Bearer {token}".encode()

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        method: str = handler_call_details.method
        if method.startswith(_OPEN_PREFIXES):
            return continuation(handler_call_details)
        supplied = ""
        for key, value in handler_call_details.invocation_metadata or ():
            if key == "authorization":
                supplied = value if isinstance(value, str) else value.decode()
        if hmac.compare_digest(supplied.encode(), self._expected):
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        GRPC_REQUESTS.labels(self.service, method.rsplit("/", 1)[-1], "UNAUTHENTICATED").inc()
        message = (
            "missing or wrong bearer token: send metadata 'authorization: Bearer <token>'"
            if supplied
            else "this server requires a bearer token: send metadata "
            "'authorization: Bearer <token>'"
        )

        def deny(_request: Any, context: grpc.ServicerContext) -> Any:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, message)

        # The denial must have the method's own shape, or gRPC mis-frames the reply.
        kind = (
            grpc.unary_stream_rpc_method_handler
            if handler.unary_stream
            else grpc.stream_unary_rpc_method_handler
            if handler.stream_unary
            else grpc.stream_stream_rpc_method_handler
            if handler.stream_stream
            else grpc.unary_unary_rpc_method_handler
        )
        return kind(
            deny,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
