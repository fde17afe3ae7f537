"""Rewrapping a gRPC method handler: what every Tribunal interceptor does to a call.

:class:`HandlerInterceptor` is their common base: health and reflection pass untouched,
every other method's handler goes to the subclass's :meth:`~HandlerInterceptor.intercept`.

An interceptor that acts on a call wraps the handler's behaviour and must hand gRPC back
a handler of the same shape (unary or streamed request and response): gRPC mis-frames a
reply of another shape. :func:`rewrap_handler` keeps the shape; the interceptor gives one
wrapper for behaviours that return one reply and one for those that yield replies.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

import grpc

__all__ = ["INFRASTRUCTURE_PREFIXES", "Behavior", "HandlerInterceptor", "rewrap_handler"]

Behavior = Callable[..., Any]
"""A handler's behaviour: ``(request, context) -> reply`` or an iterator of replies."""

INFRASTRUCTURE_PREFIXES = ("/grpc.health.", "/grpc.reflection.")
"""Health and reflection: anyone may call them, they answer while models load, and no
interceptor counts, admits or refuses them."""


class HandlerInterceptor(grpc.ServerInterceptor, abc.ABC):  # type: ignore[misc,type-arg]
    """An interceptor that acts on each call of every Tribunal method (not on health and
    reflection) by returning a rewrapped handler."""

    exempt: ClassVar[tuple[str, ...]] = INFRASTRUCTURE_PREFIXES
    """Method prefixes passed through untouched."""

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Any],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Any:
        handler = continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method.startswith(self.exempt):
            return handler
        return self.intercept(handler, method, handler_call_details)

    @abc.abstractmethod
    def intercept(
        self, handler: Any, method: str, handler_call_details: grpc.HandlerCallDetails
    ) -> Any:
        """The handler to run for a call of ``method`` (its full path), usually
        :func:`rewrap_handler` of ``handler``."""


def rewrap_handler(
    handler: Any,
    *,
    unary: Callable[[Behavior], Behavior],
    stream: Callable[[Behavior], Behavior],
    request_deserializer: Callable[[bytes], Any] | None = None,
    client_streaming: bool = True,
) -> Any:
    """``handler`` with its behaviour wrapped by ``unary`` (one reply) or ``stream``
    (replies yielded), in its own shape.

    Args:
        handler: The ``grpc.RpcMethodHandler`` to wrap.
        unary: Wraps a behaviour that returns one reply.
        stream: Wraps a behaviour that yields replies (a generator function).
        request_deserializer: Replaces the handler's own (None: keep it).
        client_streaming: False: a handler whose requests stream (Tribunal has none)
            comes back as it is.
    """
    if not client_streaming and handler.request_streaming:
        return handler
    options = {
        "request_deserializer": request_deserializer or handler.request_deserializer,
        "response_serializer": handler.response_serializer,
    }
    if handler.unary_unary:
        return grpc.unary_unary_rpc_method_handler(unary(handler.unary_unary), **options)
    if handler.unary_stream:
        return grpc.unary_stream_rpc_method_handler(stream(handler.unary_stream), **options)
    if handler.stream_unary:
        return grpc.stream_unary_rpc_method_handler(unary(handler.stream_unary), **options)
    return grpc.stream_stream_rpc_method_handler(stream(handler.stream_stream), **options)
