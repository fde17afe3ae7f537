"""Server interceptor: Prometheus metrics, readiness gate, exception mapping."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any, cast

import grpc

from ._handlers import Behavior, HandlerInterceptor, rewrap_handler
from ._metrics import GRPC_IN_FLIGHT, GRPC_LATENCY, GRPC_REQUESTS
from ._status import abort_with_error

__all__ = ["ServerInterceptor"]


class ServerInterceptor(HandlerInterceptor):
    """Wraps every Tribunal method handler.

    - rejects calls with UNAVAILABLE until ``is_ready()`` (models loaded);
    - maps :class:`~tribunal.core.TribunalError` (and any other exception) to a
      status through :func:`abort_with_error`;
    - records requests by status code, latency and in-flight calls.

    Args:
        service: The ``service`` metric label (e.g. ``"retrieval"``).
        is_ready: Returns True once the service can answer.
    """

    def __init__(self, service: str, is_ready: Callable[[], bool]) -> None:
        self.service = service
        self.is_ready = is_ready

    def intercept(
        self, handler: Any, method: str, handler_call_details: grpc.HandlerCallDetails
    ) -> Any:
        name = method.rsplit("/", 1)[-1]
        return rewrap_handler(
            handler,
            unary=lambda behavior: self._wrap_unary(name, behavior),
            stream=lambda behavior: self._wrap_stream(name, behavior),
        )

    def _wrap_unary(self, method: str, behavior: Behavior) -> Behavior:
        def wrapper(request: Any, context: grpc.ServicerContext) -> Any:
            with _Call(self, method, context) as call:
                call.check_ready()
                return behavior(request, context)

        return wrapper

    def _wrap_stream(self, method: str, behavior: Behavior) -> Behavior:
        def wrapper(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            with _Call(self, method, context) as call:
                call.check_ready()
                yield from behavior(request, context)

        return wrapper


class _Call:
    """One call's metrics and error mapping, as a context manager."""

    def __init__(
        self, owner: ServerInterceptor, method: str, context: grpc.ServicerContext
    ) -> None:
        self.owner = owner
        self.method = method
        self.context = context
        self.started = 0.0

    def check_ready(self) -> None:
        if not self.owner.is_ready():
            self.context.abort(
                grpc.StatusCode.UNAVAILABLE,
                f"{self.owner.service} is still loading its models; retry when "
                "grpc.health.v1 reports SERVING",
            )

    def __enter__(self) -> _Call:
        self.started = time.perf_counter()
        GRPC_IN_FLIGHT.labels(self.owner.service).inc()
        return self

    def _code(self) -> grpc.StatusCode | None:
        # ServicerContext.code() exists at run time (grpcio >= 1.38); the stubs lack it.
        return cast(Any, self.context).code()  # type: ignore[no-any-return]

    def __exit__(self, exc_type: Any, exc: BaseException | None, tb: Any) -> None:
        code: grpc.StatusCode | None = grpc.StatusCode.INTERNAL
        try:
            if exc is None:
                code = self._code() or grpc.StatusCode.OK
            elif isinstance(exc, GeneratorExit):
                code = grpc.StatusCode.CANCELLED
            elif self._code() not in (None, grpc.StatusCode.OK):
                # The handler (or check_ready) already aborted with a status.
                code = self._code()
            else:
                try:
                    abort_with_error(self.context, exc)
                finally:
                    code = self._code() or grpc.StatusCode.INTERNAL
        finally:
            service = self.owner.service
            code_name = code.name if isinstance(code, grpc.StatusCode) else str(code)
            GRPC_REQUESTS.labels(service, self.method, code_name).inc()
            GRPC_LATENCY.labels(service, self.method).observe(time.perf_counter() - self.started)
            GRPC_IN_FLIGHT.labels(service).dec()
