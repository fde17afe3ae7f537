"""gRPC adapter of the gateway (``tribunal.v1.GatewayService``) and its discovery.

``build_host`` wires the pipelines to the stages the settings name:
``in-process`` starts every stage's servicer on a second, loopback-only gRPC
server inside this process (its own thread pool, so gateway calls waiting on
stages can never starve them); ``grpc`` dials ``gateway.addresses``; ``ray``
calls Serve applications through handles. The pipelines cannot tell which.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed

import grpc

from ..core import FailedPreconditionError, InvalidArgumentError, Settings, UnavailableError
from ..core.server import ServiceBinding, ServiceHost
from ..core.storage import Database
from ..v1 import gateway_pb2, gateway_pb2_grpc
from ._answer import AnswerPipeline
from ._grpc_transport import GrpcTransport
from ._label import LabelPipeline
from ._stages import STAGES, StageTransport

__all__ = ["SERVICE_NAME", "GatewayServicer", "build_host", "build_stage_host"]

log = logging.getLogger(__name__)

SERVICE_NAME = "tribunal.v1.GatewayService"


def _deadline(context: grpc.ServicerContext) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None else max(0.0, float(remaining))


class GatewayServicer(gateway_pb2_grpc.GatewayServiceServicer):
    """Serves once the pipelines are wired (``set_pipelines``); UNAVAILABLE before."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._answer: AnswerPipeline | None = None
        self._label: LabelPipeline | None = None
        self._batch_workers = ThreadPoolExecutor(max_workers=4, thread_name_prefix="gw-batch")

    def set_pipelines(self, answer: AnswerPipeline, label: LabelPipeline) -> None:
        self._answer, self._label = answer, label

    def _pipelines(self) -> tuple[AnswerPipeline, LabelPipeline]:
        if self._answer is None or self._label is None:
            raise UnavailableError("the gateway is still connecting to its stages")
        return self._answer, self._label

    def Answer(
        self, request: gateway_pb2.AnswerRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.AnswerResponse:
        return self._pipelines()[0].answer(request, deadline_s=_deadline(context))

    def Label(
        self, request: gateway_pb2.LabelRequest, context: grpc.ServicerContext
    ) -> gateway_pb2.LabelResponse:
        return self._pipelines()[1].label(request, deadline_s=_deadline(context))

    def BatchLabel(
        self, request: gateway_pb2.BatchLabelRequest, context: grpc.ServicerContext
    ) -> Iterator[gateway_pb2.BatchLabelResponse]:
        """Streams results as items finish; every item is validated before any runs."""
        label = self._pipelines()[1]
        limit = self.settings.gateway.batch_max_items
        if not request.items:
            raise InvalidArgumentError("items is empty", field="items")
        if len(request.items) > limit:
            raise InvalidArgumentError(
                f"{len(request.items)} items; the limit is {limit} (gateway.batch_max_items)",
                field="items",
            )
        for i, item in enumerate(request.items):
            try:
                label.validate(item)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(
                    f"items[{i}]: {exc.message}", field=f"items[{i}].{exc.field}"
                ) from exc
        deadline = _deadline(context)
        futures = {
            self._batch_workers.submit(label.label, item, deadline_s=deadline): i
            for i, item in enumerate(request.items)
        }
        for future in as_completed(futures):
            yield gateway_pb2.BatchLabelResponse(index=futures[future], result=future.result())


def build_stage_host(
    settings: Settings, stages: Sequence[str] = STAGES, *, name: str = "stages"
) -> ServiceHost:
    """The stages' servicers (default: every stage) on one loopback server on a free port,
    models loaded in turn."""
    from ..commands.serve import SERVICES

    hosts = []
    for stage in stages:
        module_name, _, function = SERVICES[stage].partition(":")
        factory: Callable[[Settings], ServiceHost] = getattr(
            importlib.import_module(module_name), function
        )
        hosts.append(factory(settings))

    def load_all() -> None:
        for host in hosts:
            if host.loader is not None:
                host.loader()

    server = settings.server.model_copy(
        update={"host": "127.0.0.1", "port": 0, "metrics_port": None}
    )
    return ServiceHost(
        server,
        name=name,
        bindings=[binding for host in hosts for binding in host.bindings],
        loader=load_all,
    )


def _connect(settings: Settings) -> tuple[StageTransport, ServiceHost | None]:
    gateway = settings.gateway
    if gateway.discovery == "grpc":
        missing = [stage for stage in STAGES if stage not in gateway.addresses]
        if missing:
            raise FailedPreconditionError(
                f"gateway.discovery is grpc but gateway.addresses lacks {missing}",
                field="gateway.addresses",
            )
        token = settings.server.auth_token
        ca_file = gateway.stage_tls_ca_file
        return GrpcTransport(
            gateway.addresses,
            max_message_bytes=settings.server.max_message_bytes,
            token=token.get_secret_value() if token is not None else None,
            root_certificates=ca_file.read_bytes() if ca_file is not None else None,
        ), None
    if gateway.discovery == "ray":
        from ._ray_transport import RayServeTransport

        return RayServeTransport(gateway.ray_apps), None
    stages = build_stage_host(settings)
    port = stages.start()
    if not stages.wait_until_ready():
        stages.stop(0)
        raise FailedPreconditionError(f"the in-process stages failed to load: {stages.load_error}")
    address = f"127.0.0.1:{port}"
    transport = GrpcTransport(
        dict.fromkeys(STAGES, address), max_message_bytes=settings.server.max_message_bytes
    )
    return transport, stages


def build_host(settings: Settings) -> ServiceHost:
    """The gateway's ServiceHost (``tribunal serve gateway``); stages connect in the loader."""
    servicer = GatewayServicer(settings)
    opened: list[Callable[[], None]] = []
    executor = ThreadPoolExecutor(
        max_workers=max(8, settings.server.max_workers * 2), thread_name_prefix="gw-stage"
    )

    def load() -> None:
        store = Database(settings.database_url) if settings.gateway.audit else None
        if store is not None:
            store.create_schema()
            opened.append(store.close)
        transport, stages = _connect(settings)
        opened.append(transport.close)
        if stages is not None:
            opened.append(lambda: stages.stop(0))
        servicer.set_pipelines(
            AnswerPipeline(
                settings.gateway,
                transport,
                executor=executor,
                store=store,
                max_hypothesis_chars=settings.entailment.max_hypothesis_chars,
            ),
            LabelPipeline(settings.gateway, transport, store=store),
        )
        log.info("gateway connected", extra={"discovery": settings.gateway.discovery})

    def close() -> None:
        for closer in reversed(opened):
            closer()
        executor.shutdown(wait=False, cancel_futures=True)

    return ServiceHost(
        settings.server,
        name="gateway",
        bindings=[
            ServiceBinding(
                SERVICE_NAME,
                lambda server: gateway_pb2_grpc.add_GatewayServiceServicer_to_server(
                    servicer, server
                ),
            )
        ],
        loader=load,
        on_stop=close,
    )
