"""The gateway as a Ray Serve application: the same pipelines, stages reached through handles.

The deployment runs :class:`AnswerPipeline` and :class:`LabelPipeline` over a
:class:`RayServeTransport` (every stage is its own Serve application, found by
name: ``gateway.ray_apps``, default the stage name), and exposes the
proto-named methods Serve's gRPC proxy calls: ``Answer``, ``Label`` and the
server-streaming ``BatchLabel``. Clients reach it through the proxy with
metadata ``application: gateway``.

The pipelines block on stage handles (``DeploymentResponse.result``), which
must not run on the replica's event loop: each request runs on a thread of a
pool as large as ``max_ongoing_requests``, so every request Serve admits runs
at once (the event loop's default pool has only CPUs + 4 threads). The stage
fan-out (ensemble ‖ entailment per request) has its own pool, as in
``servicer.build_host``; store and pipelines are wired by the same code
(:mod:`._wiring`).

A client's gRPC deadline does not cross Serve's proxy. Tribunal's channels also send it
as ``tribunal-deadline-ms`` metadata, which the proxy passes on: the replica spends at
most that (less a margin), so a late stage becomes a FALLBACK naming it while the client
still waits. Without the header the budget is ``gateway.deadline_s`` (and the proxy's
``grpc_options.request_timeout_s``).
Every proxy call is checked by :class:`~tribunal.deploy.ServeApp`'s wrapper, as on
every other application: a credential from ``server.credentials_file`` whose role
may call the method (UNAUTHENTICATED / PERMISSION_DENIED otherwise). Handle calls
inside the cluster are not checked.

    serve.run(build_app(load_settings(gateway={"discovery": "ray"})), name="gateway")
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any, TypeVar, cast

from ray import serve
from ray.serve import Application

from ..core import Settings
from ..core.server import deadline_from_metadata
from ..deploy import ServeApp
from ..v1 import gateway_pb2
from ._ray_transport import RayServeTransport
from ._wiring import build_pipelines, open_audit_store
from .servicer import GatewayServicer

__all__ = ["GatewayDeployment", "build_app"]

T = TypeVar("T")


class _ProxyDeadline:
    """The servicer's view of a proxy call: the caller's ``tribunal-deadline-ms`` (gRPC's
    own deadline does not cross Serve's proxy), or none."""

    def __init__(self, grpc_context: Any | None) -> None:
        self._received_at = time.monotonic()
        metadata = grpc_context.invocation_metadata() if grpc_context is not None else ()
        # Checked now, on the request's way in: a malformed header is INVALID_ARGUMENT.
        self._seconds = deadline_from_metadata(metadata)

    def time_remaining(self) -> float | None:
        if self._seconds is None:
            return None
        return max(0.0, self._seconds - (time.monotonic() - self._received_at))


@serve.deployment(name="gateway")
class GatewayDeployment(ServeApp, service="gateway"):
    """A replica: the audit store, handles to the stage applications, the pipelines.

    Args:
        settings_data: ``Settings.model_dump(mode="json")`` of the driver.
    """

    def __init__(self, settings_data: dict[str, Any]) -> None:
        settings = Settings(**settings_data)
        super().__init__(settings)
        self.settings = settings
        self.store = open_audit_store(settings)
        self.transport = RayServeTransport(settings.gateway.ray_apps)
        workers = settings.gateway.deployment.max_ongoing_requests
        self._requests = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gw-request")
        self._stages = ThreadPoolExecutor(max_workers=2 * workers, thread_name_prefix="gw-stage")
        self.servicer = GatewayServicer(settings)
        self.servicer.set_pipelines(
            *build_pipelines(settings, self.transport, executor=self._stages, store=self.store)
        )

    async def _run(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._requests, call)

    async def Answer(
        self, request: gateway_pb2.AnswerRequest, grpc_context: Any = None
    ) -> gateway_pb2.AnswerResponse:
        deadline = _ProxyDeadline(grpc_context)
        return await self._run(partial(self.servicer.Answer, request, deadline))  # type: ignore[arg-type]

    async def Label(
        self, request: gateway_pb2.LabelRequest, grpc_context: Any = None
    ) -> gateway_pb2.LabelResponse:
        deadline = _ProxyDeadline(grpc_context)
        return await self._run(partial(self.servicer.Label, request, deadline))  # type: ignore[arg-type]

    async def BatchLabel(
        self, request: gateway_pb2.BatchLabelRequest, grpc_context: Any = None
    ) -> AsyncIterator[gateway_pb2.BatchLabelResponse]:
        """Streams each item's result as it finishes (the servicer's generator, in a thread)."""
        loop = asyncio.get_running_loop()
        finished: asyncio.Queue[gateway_pb2.BatchLabelResponse | None] = asyncio.Queue()
        deadline = _ProxyDeadline(grpc_context)

        def produce() -> None:
            try:
                for reply in self.servicer.BatchLabel(request, deadline):  # type: ignore[arg-type]
                    loop.call_soon_threadsafe(finished.put_nowait, reply)
            finally:
                loop.call_soon_threadsafe(finished.put_nowait, None)

        producer = loop.run_in_executor(self._requests, produce)
        while (reply := await finished.get()) is not None:
            yield reply
        await producer  # re-raises a validation error or what stopped the batch

    def __del__(self) -> None:
        # Replica shutdown: release the handles, the pools and the database.
        for closer in (
            getattr(getattr(self, "transport", None), "close", None),
            getattr(getattr(self, "store", None), "close", None),
        ):
            if closer is not None:
                closer()
        for pool in (getattr(self, "_requests", None), getattr(self, "_stages", None)):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)


def build_app(settings: Settings) -> Application:
    """The gateway application (``ray`` discovery), options from ``gateway.deployment``."""
    if settings.gateway.discovery != "ray":
        settings = settings.model_copy(
            update={"gateway": settings.gateway.model_copy(update={"discovery": "ray"})}
        )
    deployment = cast(Any, GatewayDeployment).options(**settings.gateway.deployment.ray_options())
    app: Application = deployment.bind(settings.model_dump(mode="json"))
    return app
