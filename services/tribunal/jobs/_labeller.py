"""Labellers: send items through ``Gateway.Label``'s own code, in-process or remote.

:class:`PipelineLabeller` runs :class:`tribunal.gateway.LabelPipeline` in this process
over a loopback stage host holding only the stages the mode calls (the ensemble for
``judge``, the debate for ``debate``, both for ``cascade``), exactly as the gateway
wires it for ``in-process`` discovery; :class:`GatewayLabeller` sends batches to a
running gateway's ``BatchLabel``. Both turn each LabelResponse into an
:class:`ItemResult`. This is the adapter layer: gRPC is imported here, lazily.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ..core import FailedPreconditionError, InternalError, InvalidArgumentError, Settings
from ..v1 import common_pb2, debate_pb2, gateway_pb2
from ._inputs import LabelItem
from ._store import ItemResult

if TYPE_CHECKING:
    from ..core.server import ServiceHost

__all__ = [
    "MODES",
    "GatewayLabeller",
    "Labeller",
    "PipelineLabeller",
    "label_request",
    "label_result",
    "stages_for_mode",
]

MODES: dict[str, int] = {
    "cascade": gateway_pb2.LABEL_MODE_CASCADE,
    "debate": gateway_pb2.LABEL_MODE_DEBATE,
    "judge": gateway_pb2.LABEL_MODE_JUDGE,
}
_STAGES = {"judge": ("ensemble",), "cascade": ("ensemble", "debate"), "debate": ("debate",)}


class Labeller(Protocol):
    """Labels a batch of items; thread-safe; results in the items' order."""

    def label(self, items: Sequence[LabelItem]) -> list[ItemResult]: ...

    def close(self) -> None: ...


def stages_for_mode(mode: str) -> tuple[str, ...]:
    """The stages ``LabelPipeline`` calls in ``mode`` (the others are never loaded)."""
    try:
        return _STAGES[mode]
    except KeyError:
        raise InvalidArgumentError(
            f"mode {mode!r} is not one of {', '.join(_STAGES)}", field="mode"
        ) from None


def label_request(item: LabelItem, mode: str) -> gateway_pb2.LabelRequest:
    return gateway_pb2.LabelRequest(
        query=item.query,
        chunk=item.chunk,
        answers=list(item.answers),
        mode=MODES[mode],  # type: ignore[arg-type]
        item_id=item.item_id,
    )


def label_result(response: gateway_pb2.LabelResponse, seconds: float) -> ItemResult:
    """The store's row of one LabelResponse."""
    if response.source == gateway_pb2.LABEL_SOURCE_UNSPECIFIED:
        raise InternalError(f"item {response.item_id!r} came back without a label source")
    label = {common_pb2.LABEL_RELEVANT: 1, common_pb2.LABEL_IRRELEVANT: 0}.get(response.label)
    return ItemResult(
        item_id=response.item_id,
        label=label,
        source=gateway_pb2.LabelSource.Name(response.source).removeprefix("LABEL_SOURCE_"),
        p_relevant=response.p_relevant if response.HasField("p_relevant") else None,
        outcome=(
            debate_pb2.DebateOutcome.Name(response.debate.outcome).removeprefix("DEBATE_OUTCOME_")
            if response.HasField("debate")
            else ""
        ),
        tokens=response.usage.prompt_tokens + response.usage.completion_tokens,
        seconds=seconds,
        escalation_id=response.escalation_id,
        audit_id=response.audit_id,
    )


def build_label_stages(settings: Settings, stages: Sequence[str]) -> ServiceHost:
    """The named stages' servicers on one loopback gRPC server, models loaded in turn
    (``gateway.servicer.build_stage_host`` for a subset: a judge-only job never loads the
    debate's models). The loopback server takes no token: only this process dials it."""
    from ..gateway.servicer import build_stage_host

    server = settings.server.model_copy(update={"auth_token": None})
    # Labelling is what the ensemble stage is here for: load its relevance judge up front,
    # and not the matching panel (three LLMs Label never calls).
    ensemble = settings.ensemble.model_copy(
        update={"relevance_preload": True, "serve_match": False}
    )
    return build_stage_host(
        settings.model_copy(update={"server": server, "ensemble": ensemble}),
        stages,
        name="label-stages",
    )


class PipelineLabeller:
    """``LabelPipeline`` in this process; the audit and escalation writes go to
    ``settings.database_url`` as the gateway's do."""

    def __init__(self, settings: Settings, mode: str, *, load_timeout_s: float = 3600.0) -> None:
        from ..core.storage import Database
        from ..gateway import LabelPipeline, StageTransport
        from ..gateway._grpc_transport import GrpcTransport

        self.mode = mode
        self._host = build_label_stages(settings, stages_for_mode(mode))
        port = self._host.start()
        if not self._host.wait_until_ready(load_timeout_s):
            self._host.stop(0)
            raise FailedPreconditionError(
                f"the labelling stages failed to load: {self._host.load_error}"
            )
        address = f"127.0.0.1:{port}"
        self._transport: StageTransport = GrpcTransport(
            dict.fromkeys(stages_for_mode(mode), address),
            max_message_bytes=settings.server.max_message_bytes,
        )
        self._store = Database(settings.database_url) if settings.gateway.audit else None
        self._pipeline = LabelPipeline(settings.gateway, self._transport, store=self._store)

    def label(self, items: Sequence[LabelItem]) -> list[ItemResult]:
        results = []
        for item in items:
            started = time.perf_counter()
            response = self._pipeline.label(label_request(item, self.mode))
            results.append(label_result(response, time.perf_counter() - started))
        return results

    def close(self) -> None:
        self._transport.close()
        self._host.stop(0)
        if self._store is not None:
            self._store.close()


class GatewayLabeller:
    """A running gateway's ``BatchLabel`` (``tribunal serve gateway``, or Serve's proxy)."""

    def __init__(
        self,
        address: str,
        mode: str,
        *,
        token: str | None = None,
        timeout_s: float = 3600.0,
        max_message_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        import grpc

        from ..v1 import gateway_pb2_grpc

        self.mode = mode
        self._timeout_s = timeout_s
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self._channel = grpc.insecure_channel(
            address,
            options=[
                ("grpc.max_receive_message_length", max_message_bytes),
                ("grpc.max_send_message_length", max_message_bytes),
            ],
        )
        self._stub: Any = gateway_pb2_grpc.GatewayServiceStub(self._channel)  # type: ignore[no-untyped-call]

    def label(self, items: Sequence[LabelItem]) -> list[ItemResult]:
        import grpc

        from ..core import UnavailableError

        started = time.perf_counter()
        request = gateway_pb2.BatchLabelRequest(
            items=[label_request(item, self.mode) for item in items]
        )
        results: dict[int, ItemResult] = {}
        try:
            for reply in self._stub.BatchLabel(
                request, timeout=self._timeout_s, metadata=self._metadata
            ):
                # Per-item time is not reported by the gateway: the batch's wall time
                # shared out is what the cost report needs.
                results[reply.index] = label_result(reply.result, 0.0)
        except grpc.RpcError as exc:
            raise UnavailableError(
                f"gateway BatchLabel failed: {exc.code().name}: {exc.details()}"
            ) from exc
        if len(results) != len(items):
            raise InternalError(f"BatchLabel answered {len(results)} of {len(items)} items")
        share = (time.perf_counter() - started) / len(items)
        ordered = [results[i] for i in range(len(items))]
        return [dataclasses.replace(result, seconds=share) for result in ordered]

    def close(self) -> None:
        self._channel.close()
