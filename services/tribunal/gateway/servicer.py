"""gRPC adapter of the gateway (``tribunal.v1.GatewayService``).

``build_host`` wires the pipelines to the stages ``gateway.discovery`` names
(in-process, remote gRPC or Ray Serve handles: :mod:`._wiring`); the pipelines
cannot tell which.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed

import grpc

from ..core import InvalidArgumentError, ResourceExhaustedError, Settings, UnavailableError
from ..core.server import ServiceHost, status_for
from ..v1 import gateway_pb2, gateway_pb2_grpc
from ._answer import AnswerPipeline
from ._label import LabelPipeline
from ._wiring import build_pipelines, connect_stages, open_audit_store

__all__ = ["SERVICE_NAME", "GatewayServicer", "build_host"]

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
        """Streams results as items finish; every item is validated before any runs. An
        item that fails while it runs (a stage down, the audit write) gets its own error
        reply and the others go on."""
        label = self._pipelines()[1]
        limit = self.settings.gateway.max_items_per_request
        if not request.items:
            raise InvalidArgumentError("items is empty", field="items")
        if len(request.items) > limit:
            raise ResourceExhaustedError(
                f"{len(request.items)} items; the limit is {limit} "
                "(gateway.max_items_per_request): split the batch",
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
            index = futures[future]
            try:
                result = future.result()
            except Exception as exc:  # one item's failure ends only that item
                code, message = status_for(exc)
                yield gateway_pb2.BatchLabelResponse(
                    index=index, error_code=code.name, error_message=message
                )
                continue
            yield gateway_pb2.BatchLabelResponse(index=index, result=result)


def build_host(settings: Settings) -> ServiceHost:
    """The gateway's ServiceHost (``tribunal serve gateway``); stages connect in the loader."""
    servicer = GatewayServicer(settings)
    opened: list[Callable[[], None]] = []
    executor = ThreadPoolExecutor(
        max_workers=max(8, settings.server.max_workers * 2), thread_name_prefix="gw-stage"
    )

    def load() -> None:
        store = open_audit_store(settings)
        if store is not None:
            opened.append(store.close)
        transport, stages = connect_stages(settings)
        opened.append(transport.close)
        if stages is not None:
            opened.append(lambda: stages.stop(0))
        servicer.set_pipelines(
            *build_pipelines(settings, transport, executor=executor, store=store)
        )
        log.info("gateway connected", extra={"discovery": settings.gateway.discovery})

    def close() -> None:
        for closer in reversed(opened):
            closer()
        executor.shutdown(wait=False, cancel_futures=True)

    return ServiceHost.for_servicer(
        settings,
        name="gateway",
        full_name=SERVICE_NAME,
        add_servicer=gateway_pb2_grpc.add_GatewayServiceServicer_to_server,
        servicer=servicer,
        loader=load,
        on_stop=close,
    )
