"""Labellers: send items through ``Gateway.Label``'s own code, in-process or remote.

:class:`PipelineLabeller` runs :class:`tribunal.gateway.LabelPipeline` in this process
over a loopback stage host holding only the stages the mode calls
(:data:`tribunal.gateway.LABEL_MODE_STAGES`), wired by the gateway's own code as for
``in-process`` discovery; :class:`GatewayLabeller` sends batches to a
running gateway's ``BatchLabel``. Both turn each LabelResponse into an
:class:`ItemResult`. This is the adapter layer: gRPC is imported here, lazily.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from ..core import InternalError, InvalidArgumentError, Settings, TribunalError, UnavailableError
from ..gateway import LabelMode, LabelPipeline, label_stages
from ..v1 import common_pb2, debate_pb2, gateway_pb2
from ._items import LabelItem
from ._store import ItemResult

__all__ = [
    "GatewayLabeller",
    "Labeller",
    "PartialBatchError",
    "PipelineLabeller",
    "failed_result",
    "label_request",
    "label_result",
    "shares_passes",
]


class PartialBatchError(UnavailableError):
    """Some items of a batch were labelled before an error that may pass (a stage or the
    store down): ``results`` are theirs, to be kept; the rest stay pending."""

    def __init__(self, message: str, results: Sequence[ItemResult]) -> None:
        super().__init__(message)
        self.results = list(results)


class Labeller(Protocol):
    """Labels a batch of items; thread-safe; results in the items' order.

    An item the pipeline refuses (INVALID_ARGUMENT) gets a :func:`failed_result` and the
    batch goes on; an error that may pass raises :class:`PartialBatchError` with the
    results so far.
    """

    def label(self, items: Sequence[LabelItem]) -> list[ItemResult]: ...

    def close(self) -> None: ...


def label_request(item: LabelItem, mode: str) -> gateway_pb2.LabelRequest:
    return gateway_pb2.LabelRequest(
        query=item.query,
        chunk=item.chunk,
        answers=list(item.answers),
        mode=LabelMode.parse(mode).proto,
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


def failed_result(item_id: str, reason: str, seconds: float = 0.0) -> ItemResult:
    """The result of an item the pipeline refused: source ``FAILED`` and the reason."""
    return ItemResult(item_id=item_id, label=None, source="FAILED", seconds=seconds, error=reason)


def label_settings(settings: Settings) -> Settings:
    """``settings`` as the labelling stages run them: the loopback server takes no token
    (only this process dials it)."""
    server = settings.server.model_copy(update={"auth_token": None})
    return settings.model_copy(update={"server": server})


LABEL_HOST_OPTIONS: dict[str, dict[str, bool]] = {
    "ensemble": {"serve_match": False, "preload_relevance": True}
}
"""How the labelling stages are hosted: the ensemble loads its relevance judge up front
and not the matching panel (three LLMs ``Label`` never calls)."""


JUDGE_CONCURRENCY = 32
"""Items of a judge-mode batch labelled at once in this process: enough that the
judge's embedder runs full forward passes (its micro-batches), few enough to keep the
per-item latency of a batch near one pass."""


def shares_passes(mode: str | LabelMode, band_to: str = "debate") -> bool:
    """Whether a mode's items run only the relevance judge — judge mode, or a cascade whose
    band goes to humans (``label run --plan``) — so that the items of a batch share the
    judge embedder's forward passes when labelled together. A debate stage labels its
    items one by one (its LLM calls batch on their own)."""
    return "debate" not in label_stages(LabelMode.parse(str(mode)), band_to)


class PipelineLabeller:
    """``LabelPipeline`` in this process; the audit and escalation writes go to
    ``settings.database_url`` as the gateway's do. ``concurrency`` items of a batch run
    at once (default: :data:`JUDGE_CONCURRENCY` when no debate is loaded —
    :func:`shares_passes` — since the items share the embedder's forward passes; 1
    otherwise)."""

    def __init__(
        self,
        settings: Settings,
        mode: str,
        *,
        load_timeout_s: float = 3600.0,
        concurrency: int | None = None,
    ) -> None:
        from ..gateway import open_audit_store, serve_stages

        self.mode = LabelMode.parse(mode)
        if concurrency is None:
            shared = shares_passes(self.mode, settings.gateway.label_band_to)
            concurrency = JUDGE_CONCURRENCY if shared else 1
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.concurrency = concurrency
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="label-item")
        self._transport, self._host = serve_stages(
            label_settings(settings),
            label_stages(self.mode, settings.gateway.label_band_to),
            name="label-stages",
            load_timeout_s=load_timeout_s,
            host_options=LABEL_HOST_OPTIONS,
        )
        self._store = open_audit_store(settings)
        self._pipeline = LabelPipeline(settings.gateway, self._transport, store=self._store)

    def _one(self, item: LabelItem) -> ItemResult:
        started = time.perf_counter()
        try:
            response = self._pipeline.label(label_request(item, self.mode))
        except InvalidArgumentError as exc:
            return failed_result(item.item_id, str(exc), time.perf_counter() - started)
        return label_result(response, time.perf_counter() - started)

    def label(self, items: Sequence[LabelItem]) -> list[ItemResult]:
        # The items of a batch run concurrently (``concurrency`` at a time): the stages
        # gather their model calls (the judge's embeddings) into shared forward passes.
        started = time.perf_counter()
        futures = [self._pool.submit(self._one, item) for item in items]
        results: list[ItemResult] = []
        failure: tuple[LabelItem, TribunalError] | None = None
        for item, future in zip(items, futures, strict=True):
            try:
                results.append(future.result())
            except TribunalError as exc:
                failure = failure or (item, exc)
        if self.concurrency > 1 and results:
            # Items that ran side by side each waited for the shared passes: the batch's
            # wall time shared out is what an item cost (as for a remote BatchLabel).
            share = (time.perf_counter() - started) / len(items)
            results = [dataclasses.replace(result, seconds=share) for result in results]
        if failure is not None:
            failed, error = failure
            raise PartialBatchError(f"item {failed.item_id!r}: {error}", results) from error
        return results

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
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
        tls_ca: Path | None = None,
        server_name: str = "",
        timeout_s: float = 3600.0,
        max_message_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        from ..core.server import bearer_metadata, open_channel
        from ..v1 import gateway_pb2_grpc

        self.mode = mode
        self._timeout_s = timeout_s
        self._metadata = bearer_metadata(token)
        # The token never travels in plaintext beyond loopback: TLS with tls_ca.
        self._channel = open_channel(
            address,
            tls_ca=tls_ca,
            server_name=server_name,
            sends_credentials=bool(token),
            max_message_bytes=max_message_bytes,
            what="the gateway",
        )
        self._stub: Any = gateway_pb2_grpc.GatewayServiceStub(self._channel)  # type: ignore[no-untyped-call]

    def label(self, items: Sequence[LabelItem]) -> list[ItemResult]:
        import grpc

        started = time.perf_counter()
        request = gateway_pb2.BatchLabelRequest(
            items=[label_request(item, self.mode) for item in items]
        )
        results: dict[int, ItemResult] = {}
        transient: list[str] = []
        try:
            for reply in self._stub.BatchLabel(
                request, timeout=self._timeout_s, metadata=self._metadata
            ):
                # Per-item time is not reported by the gateway: the batch's wall time
                # shared out is what the cost report needs.
                item_id = items[reply.index].item_id
                if reply.error_code == "INVALID_ARGUMENT":
                    results[reply.index] = failed_result(item_id, reply.error_message)
                elif reply.error_code:
                    transient.append(f"{item_id}: {reply.error_code}: {reply.error_message}")
                else:
                    results[reply.index] = label_result(reply.result, 0.0)
        except grpc.RpcError as exc:
            if exc.code() == grpc.StatusCode.INVALID_ARGUMENT and not results:
                # The gateway refuses a batch with one bad item before running any:
                # label one at a time, so that only the bad one fails.
                if len(items) > 1:
                    return [result for item in items for result in self.label([item])]
                return [failed_result(items[0].item_id, str(exc.details()))]
            raise PartialBatchError(
                f"gateway BatchLabel failed: {exc.code().name}: {exc.details()}",
                list(results.values()),
            ) from exc
        share = (time.perf_counter() - started) / len(items)
        ordered = [
            dataclasses.replace(results[i], seconds=share)
            for i in range(len(items))
            if i in results
        ]
        if transient:
            raise PartialBatchError(f"BatchLabel: {'; '.join(transient[:3])}", ordered)
        if len(ordered) != len(items):
            raise InternalError(f"BatchLabel answered {len(ordered)} of {len(items)} items")
        return ordered

    def close(self) -> None:
        self._channel.close()
