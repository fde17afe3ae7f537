"""Stages loaded in the gateway's process and called directly: no port, no serialisation.

``in-process`` discovery builds the stages' servicers here and calls their methods on a
thread pool of their own, so gateway calls waiting on stages never starve them, and a
stage that runs past its timeout is left behind as a gRPC call would be. A stage sees
the request's time budget (:func:`~tribunal.core.check_deadline`) and raises the same
Tribunal errors as behind a server; the gateway checks its replies the same way. Nothing
outside the process can reach these stages, and they take no KB writes.

A stage's models load when it is first called, unless it is named in ``preload`` (the
gateway preloads the stages ``Answer`` calls, :data:`ANSWER_STAGES`, so that it reports
ready with them loaded): a stack that never labels never loads the debate's or the
entailment checker's LLMs. A stage that fails to load answers every call with that
failure (FAILED_PRECONDITION, naming what to fix); the other stages serve.
"""

from __future__ import annotations

import logging
import threading
import time
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

log = logging.getLogger(__name__)

_WRITES = frozenset({("retrieval", "Upsert"), ("retrieval", "Delete")})
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
    """The named stages' servicers, called in this process; each stage's models load at
    its first call, or here for the stages in ``preload``.

    Args:
        settings: The stages' settings (the gateway's).
        stages: Which stages to serve.
        max_workers: Threads that run stage calls (the gateway bounds how many it makes).
        preload: Stages loaded now (default: every one of ``stages``).

    Raises:
        FailedPreconditionError: a preloaded stage failed to load.
    """

    def __init__(
        self,
        settings: Settings,
        stages: Sequence[str],
        *,
        max_workers: int,
        preload: Sequence[str] | None = None,
    ) -> None:
        self._hosts: dict[str, ServiceHost] = {
            stage: SERVICES[stage].build_host(settings) for stage in stages
        }
        self._loaded: dict[str, str | None] = {}
        """Stage → None when loaded, or why it failed to load."""
        self._load_locks = {stage: threading.Lock() for stage in stages}
        try:
            for stage in stages if preload is None else preload:
                if self.load(stage) is not None:
                    raise FailedPreconditionError(self._loaded[stage] or "")
        except Exception:
            self._stop_hosts()
            raise
        recorder = _MethodRecorder()
        for host in self._hosts.values():
            for binding in host.bindings:
                binding.register(recorder)  # type: ignore[arg-type]  # the methods grpc would route
        self._methods = {
            stage: recorder.services[SERVICES[stage].full_proto_service] for stage in stages
        }
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="work-stages")

    @property
    def loaded_stages(self) -> tuple[str, ...]:
        """The stages whose models are loaded, in load order."""
        return tuple(stage for stage, failure in self._loaded.items() if failure is None)

    def load(self, stage: str) -> str | None:
        """Load ``stage``'s models unless done (one load at a time per stage); None when
        loaded, else why it failed (kept: later calls fail at once with it)."""
        with self._load_locks[stage]:
            if stage in self._loaded:
                return self._loaded[stage]
            host = self._hosts[stage]
            started = time.perf_counter()
            try:
                if host.loader is not None:
                    host.loader()
            except Exception as exc:
                self._loaded[stage] = f"the in-process {stage} stage failed to load: {exc}"
                log.error(
                    "in-process stage failed to load", extra={"stage": stage, "error": str(exc)}
                )
            else:
                self._loaded[stage] = None
                log.info(
                    "in-process stage loaded",
                    extra={"stage": stage, "seconds": round(time.perf_counter() - started, 2)},
                )
            return self._loaded[stage]

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
            future = self._pool.submit(
                self._run_loaded, stage, handler.unary_unary, request, budget
            )
        except RuntimeError as exc:  # the pool is shut down: the gateway is stopping
            raise UnavailableError(f"{stage}.{method}: the in-process stages are closed") from exc
        try:
            return future.result(timeout=timeout_s)
        except FutureTimeout as exc:
            # Nobody waits any more: the stage stops at its next deadline check.
            budget.abandon("the gateway stopped waiting")
            future.cancel()
            raise DeadlineExceededError(f"{stage}.{method} took over {timeout_s:.2f}s") from exc

    def _run_loaded(
        self, stage: str, behavior: Callable[[Any, Any], Any], request: Any, budget: RequestBudget
    ) -> Any:
        # Loaded on the pool's thread: a caller past its timeout leaves the load running,
        # and a later call finds the stage loaded.
        failure = self.load(stage)
        if failure is not None:
            raise FailedPreconditionError(failure)
        with request_scope(budget):
            budget.check("the stage call")  # waited in the queue past its deadline
            return behavior(request, None)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._stop_hosts()

    def _stop_hosts(self) -> None:
        for stage, host in self._hosts.items():
            if host.on_stop is not None and stage in self._loaded:
                host.on_stop()
        self._hosts = {}
