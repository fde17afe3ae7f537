"""Stages loaded in the gateway's process and called directly: no port, no serialisation.

``in-process`` discovery builds the stages' servicers here and calls their methods on a
thread pool of their own, so gateway calls waiting on stages never starve them, and a
stage that runs past its timeout is left behind as a gRPC call would be. A stage sees
the request's time budget (:func:`~tribunal.core.check_deadline`) and raises the same
Tribunal errors as behind a server; the gateway checks its replies the same way. Nothing
outside the process can reach these stages, and they take no KB writes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from ..core import (
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    PermissionDeniedError,
    RequestBudget,
    Settings,
    UnavailableError,
    request_scope,
)
from ..core.server import ServiceHost
from ..deploy import SERVICES

__all__ = ["LocalTransport"]

_WRITES = frozenset({("retrieval", "Upsert"), ("retrieval", "Delete"), ("retrieval", "Sign")})
"""Methods that change the KB: they need a caller's credential, which a direct call has not."""


class _MethodRecorder:
    """Stands in for a ``grpc.Server`` to a generated ``add_*Servicer_to_server``: keeps
    the method handlers it registers (each holds the servicer's bound method)."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, Any]] = {}

    def add_generic_rpc_handlers(self, handlers: Sequence[Any]) -> None:
        """The same methods as the registered handlers below; nothing to keep."""

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, Any]) -> None:
        self.services[service] = dict(handlers)


class LocalTransport:
    """The named stages' servicers, models loaded, called in this process.

    Args:
        settings: The stages' settings (the gateway's).
        stages: Which stages to load.
        max_workers: Threads that run stage calls (the gateway bounds how many it makes).

    Raises:
        FailedPreconditionError: a stage failed to load.
    """

    def __init__(self, settings: Settings, stages: Sequence[str], *, max_workers: int) -> None:
        self._hosts: list[ServiceHost] = [SERVICES[stage].build_host(settings) for stage in stages]
        try:
            for host in self._hosts:
                if host.loader is not None:
                    host.loader()
        except Exception as exc:
            self._stop_hosts()
            raise FailedPreconditionError(f"the in-process stages failed to load: {exc}") from exc
        recorder = _MethodRecorder()
        for host in self._hosts:
            for binding in host.bindings:
                binding.register(recorder)  # type: ignore[arg-type]  # the methods grpc would route
        self._methods = {
            stage: recorder.services[SERVICES[stage].full_proto_service] for stage in stages
        }
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="work-stages")

    def call(self, stage: str, method: str, request: Any, timeout_s: float) -> Any:
        if (stage, method) in _WRITES:
            raise PermissionDeniedError(
                f"{stage}.{method} changes the KB: write through the retrieval service "
                "with a credential (tribunal kb), not through the gateway's stages"
            )
        handler = self._methods.get(stage, {}).get(method)
        if handler is None or handler.unary_unary is None:
            raise InternalError(f"no in-process stage {stage!r} with a unary method {method!r}")
        budget = RequestBudget(timeout_s)
        try:
            future = self._pool.submit(_run, handler.unary_unary, request, budget)
        except RuntimeError as exc:  # the pool is shut down: the gateway is stopping
            raise UnavailableError(f"{stage}.{method}: the in-process stages are closed") from exc
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout as exc:
            # Nobody waits any more: the stage stops at its next deadline check.
            budget.abandon("the gateway stopped waiting")
            future.cancel()
            raise DeadlineExceededError(f"{stage}.{method} took over {timeout_s:.2f}s") from exc

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._stop_hosts()

    def _stop_hosts(self) -> None:
        for host in self._hosts:
            if host.on_stop is not None:
                host.on_stop()
        self._hosts = []


def _run(behavior: Callable[[Any, Any], Any], request: Any, budget: RequestBudget) -> Any:
    with request_scope(budget):
        budget.check("the stage call")  # waited in the queue past its deadline
        return behavior(request, None)
