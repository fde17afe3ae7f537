"""Stages over gRPC: remote addresses, or the in-process host's loopback port."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

import grpc

from ..core import (
    ConfigError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    TribunalError,
    UnavailableError,
)
from ..v1 import (
    confidence_pb2_grpc,
    debate_pb2_grpc,
    ensemble_pb2_grpc,
    entailment_pb2_grpc,
    retrieval_pb2_grpc,
)
from ._stages import STAGES

__all__ = ["GrpcTransport"]

_STUBS: dict[str, Callable[[grpc.Channel], Any]] = {
    "retrieval": retrieval_pb2_grpc.RetrievalServiceStub,
    "ensemble": ensemble_pb2_grpc.EnsembleServiceStub,
    "entailment": entailment_pb2_grpc.EntailmentServiceStub,
    "confidence": confidence_pb2_grpc.ConfidenceServiceStub,
    "debate": debate_pb2_grpc.DebateServiceStub,
}
_ERRORS: dict[grpc.StatusCode, type[TribunalError]] = {
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
}


class GrpcTransport:
    """One channel per address, stubs per stage; gRPC status codes become Tribunal errors.

    ``token`` is sent as a bearer token on every call; ``root_certificates`` (PEM)
    turns the channels into TLS channels that trust them.
    """

    def __init__(
        self,
        addresses: Mapping[str, str],
        *,
        max_message_bytes: int,
        token: str | None = None,
        root_certificates: bytes | None = None,
    ) -> None:
        unknown = sorted(set(addresses) - set(STAGES))
        if unknown:
            raise ConfigError(
                f"gateway.addresses names unknown stages {unknown} (known: {', '.join(STAGES)})",
                field="gateway.addresses",
            )
        self.addresses = dict(addresses)
        self._options = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ]
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self._root_certificates = root_certificates
        self._channels: dict[str, grpc.Channel] = {}
        self._stubs: dict[str, Any] = {}
        self._lock = threading.Lock()

    def _stub(self, stage: str) -> Any:
        with self._lock:
            stub = self._stubs.get(stage)
            if stub is None:
                address = self.addresses.get(stage)
                if address is None:
                    raise ConfigError(
                        f"no address for stage {stage!r}: set gateway.addresses.{stage} "
                        f'(TRIBUNAL_GATEWAY__ADDRESSES=\'{{"{stage}": "host:port"}}\')',
                        field=f"gateway.addresses.{stage}",
                    )
                channel = self._channels.get(address)
                if channel is None:
                    channel = (
                        grpc.secure_channel(
                            address,
                            grpc.ssl_channel_credentials(self._root_certificates),
                            options=self._options,
                        )
                        if self._root_certificates is not None
                        else grpc.insecure_channel(address, options=self._options)
                    )
                    self._channels[address] = channel
                stub = self._stubs[stage] = _STUBS[stage](channel)
            return stub

    def call(self, stage: str, method: str, request: Any, timeout_s: float) -> Any:
        rpc = getattr(self._stub(stage), method)
        try:
            return rpc(request, timeout=timeout_s, metadata=self._metadata)
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
            details = exc.details() if hasattr(exc, "details") else str(exc)
            error = _ERRORS.get(code, InternalError)
            raise error(f"{stage}.{method} returned {code.name}: {details}") from exc

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stubs.clear()
