"""A real gRPC server between the gateway and the real stage servers that rewrites replies.

The proxy serves ``RetrievalService.Search``, ``EnsembleService.BatchMatch`` and
``ConfidenceService.BatchScore``: each call is forwarded to the stage server at
``upstream`` and its reply handed to the active :class:`Mode`'s ``rewrite`` (a
faulty network or an attacker on the path) before the gateway sees it. With no
mode set it passes replies through unchanged.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from tribunal.core import ServerSettings
from tribunal.core.server import ServiceBinding, ServiceHost
from tribunal.v1 import (
    confidence_pb2_grpc,
    ensemble_pb2_grpc,
    retrieval_pb2_grpc,
)

__all__ = ["Mode", "TamperProxy"]

Rewrite = Callable[[Any, Any, Any], Any]
"""``rewrite(request, reply, previous reply of the same method or None) -> reply``."""


@dataclass(frozen=True)
class Mode:
    """One way of rewriting one stage's replies, and the decision it must end in."""

    name: str
    stage: str
    """``retrieval``, ``ensemble`` or ``confidence``: whose replies are rewritten."""
    rewrite: Rewrite
    reason: str
    """The fallback reason the gateway must give (``MALFORMED_RESPONSE``, ``UNVERIFIED``)."""
    failed_stage: str
    """The stage the gateway must name ("" when the reason names none)."""
    off_topic: bool = False
    """Ask the off-topic query (the untampered decision is a LOW_CONFIDENCE fallback)."""
    query: str | None = None
    """Ask this query instead."""


class TamperProxy:
    """Forwards to ``upstream`` (one address serving the three stages), rewriting replies.

    ``upstream_channel`` replaces the plaintext channel to ``upstream`` (Serve's gRPC
    proxy: mutual TLS); ``routed`` names each call's stage in ``application`` metadata,
    which Serve's proxy routes by.
    """

    def __init__(
        self, upstream: str, *, upstream_channel: grpc.Channel | None = None, routed: bool = False
    ) -> None:
        self.channel = upstream_channel or grpc.insecure_channel(upstream)
        self.routed = routed
        self.stubs = {
            "retrieval": retrieval_pb2_grpc.RetrievalServiceStub(self.channel),  # type: ignore[no-untyped-call]
            "ensemble": ensemble_pb2_grpc.EnsembleServiceStub(self.channel),  # type: ignore[no-untyped-call]
            "confidence": confidence_pb2_grpc.ConfidenceServiceStub(self.channel),  # type: ignore[no-untyped-call]
        }
        self.mode: Mode | None = None
        self.rewritten: dict[str, int] = {}
        """Replies rewritten, by mode name."""
        self._previous: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.host = ServiceHost(
            ServerSettings(port=0, metrics_port=None, grace_seconds=0.5),
            name="tamper-proxy",
            bindings=[
                ServiceBinding(
                    "tribunal.v1.RetrievalService",
                    lambda s: retrieval_pb2_grpc.add_RetrievalServiceServicer_to_server(
                        _Retrieval(self), s
                    ),
                ),
                ServiceBinding(
                    "tribunal.v1.EnsembleService",
                    lambda s: ensemble_pb2_grpc.add_EnsembleServiceServicer_to_server(
                        _Ensemble(self), s
                    ),
                ),
                ServiceBinding(
                    "tribunal.v1.ConfidenceService",
                    lambda s: confidence_pb2_grpc.add_ConfidenceServiceServicer_to_server(
                        _Confidence(self), s
                    ),
                ),
            ],
        )

    def start(self) -> str:
        """Serve on a free loopback port; the proxy's address."""
        port = self.host.start()
        assert self.host.wait_until_ready(10)
        return f"127.0.0.1:{port}"

    def stop(self) -> None:
        self.host.stop(0)
        self.channel.close()

    def _route(self, stage: str) -> tuple[tuple[str, str], ...]:
        return (("application", stage),) if self.routed else ()

    def search_upstream(self, request: Any, timeout: float) -> Any:
        """A Search straight to the upstream, untampered."""
        return self.stubs["retrieval"].Search(
            request, timeout=timeout, metadata=self._route("retrieval")
        )

    def forward(self, stage: str, method: str, request: Any, context: grpc.ServicerContext) -> Any:
        remaining = context.time_remaining()
        try:
            reply = getattr(self.stubs[stage], method)(
                request, timeout=remaining, metadata=self._route(stage)
            )
        except grpc.RpcError as exc:
            context.abort(exc.code(), exc.details())  # type: ignore[attr-defined]
        with self._lock:
            mode = self.mode
            previous = self._previous.get(method)
            self._previous[method] = reply
        if mode is None or mode.stage != stage:
            return reply
        tampered = type(reply)()
        tampered.CopyFrom(reply)
        tampered = mode.rewrite(request, tampered, previous)
        with self._lock:
            self.rewritten[mode.name] = self.rewritten.get(mode.name, 0) + 1
        return tampered


class _Retrieval(retrieval_pb2_grpc.RetrievalServiceServicer):
    def __init__(self, proxy: TamperProxy) -> None:
        self.proxy = proxy

    def Search(self, request, context):  # type: ignore[no-untyped-def]
        return self.proxy.forward("retrieval", "Search", request, context)


class _Ensemble(ensemble_pb2_grpc.EnsembleServiceServicer):
    def __init__(self, proxy: TamperProxy) -> None:
        self.proxy = proxy

    def BatchMatch(self, request, context):  # type: ignore[no-untyped-def]
        return self.proxy.forward("ensemble", "BatchMatch", request, context)


class _Confidence(confidence_pb2_grpc.ConfidenceServiceServicer):
    def __init__(self, proxy: TamperProxy) -> None:
        self.proxy = proxy

    def BatchScore(self, request, context):  # type: ignore[no-untyped-def]
        return self.proxy.forward("confidence", "BatchScore", request, context)
