"""Stages over gRPC: remote addresses, or the in-process host's loopback port.

Every call carries the gateway's credential for the stages (``authorization: Bearer``)
and, when the stages serve TLS, goes over TLS checked against their CA: the transport
is set up to match the stages it dials (:mod:`._wiring` does, for each discovery).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc

from ..core import (
    ConfigError,
    DeadlineExceededError,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    TribunalError,
    UnauthenticatedError,
    UnavailableError,
)
from ..core.server import open_channel
from ..deploy import SERVICES, STAGES

__all__ = ["GrpcTransport", "TokenFile"]

_ERRORS: dict[grpc.StatusCode, type[TribunalError]] = {
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPreconditionError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
}

_CREDENTIAL_HINT = (
    " (the gateway's credential for its stages: gateway.stage_token_file, a query "
    "credential of theirs)"
)


class TokenFile:
    """A bearer token kept in a file (a mounted Secret), re-read when the file changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen: tuple[int, int] | None = None
        self._token = ""
        self._lock = threading.Lock()

    def __call__(self) -> str:
        try:
            stat = self.path.stat()
        except OSError as exc:
            raise ConfigError(
                f"cannot read gateway.stage_token_file {self.path}: {exc.strerror}",
                field="gateway.stage_token_file",
            ) from None
        with self._lock:
            if self._seen != (stat.st_mtime_ns, stat.st_size):
                self._token = self.path.read_text(encoding="utf-8").strip()
                self._seen = (stat.st_mtime_ns, stat.st_size)
            return self._token


class GrpcTransport:
    """One channel per address, stubs per stage; gRPC status codes become Tribunal errors.

    ``token`` (a string, or a function returning the current one) is sent as a bearer
    token on every call; ``root_certificates`` (PEM) turns the channels into TLS channels
    that trust them, checking the stages' certificate for ``server_name`` when given
    (else for the host of the address); ``client_certificate`` (PEM chain, PEM key) is
    presented to stages that require one (mutual TLS).
    """

    def __init__(
        self,
        addresses: Mapping[str, str],
        *,
        max_message_bytes: int,
        token: str | Callable[[], str] | None = None,
        root_certificates: bytes | None = None,
        server_name: str = "",
        client_certificate: tuple[bytes, bytes] | None = None,
    ) -> None:
        unknown = sorted(set(addresses) - set(STAGES))
        if unknown:
            raise ConfigError(
                f"gateway.addresses names unknown stages {unknown} (known: {', '.join(STAGES)})",
                field="gateway.addresses",
            )
        self.addresses = dict(addresses)
        self._max_message_bytes = max_message_bytes
        self._server_name = server_name if root_certificates is not None else ""
        self._token = token
        self._root_certificates = root_certificates
        self._client_certificate = client_certificate
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
                    channel = open_channel(
                        address,
                        tls_ca=self._root_certificates,
                        tls_cert=self._client_certificate[0] if self._client_certificate else None,
                        tls_key=self._client_certificate[1] if self._client_certificate else None,
                        server_name=self._server_name,
                        sends_credentials=callable(self._token) or bool(self._token),
                        max_message_bytes=self._max_message_bytes,
                        what=f"stage {stage!r}",
                    )
                    self._channels[address] = channel
                stub = self._stubs[stage] = SERVICES[stage].stub(channel)
            return stub

    def _metadata(self) -> tuple[tuple[str, str], ...] | None:
        token = self._token() if callable(self._token) else self._token
        return (("authorization", f"Bearer {token}"),) if token else None

    def call(self, stage: str, method: str, request: Any, timeout_s: float) -> Any:
        rpc = getattr(self._stub(stage), method)
        try:
            return rpc(request, timeout=timeout_s, metadata=self._metadata())
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
            details = exc.details() if hasattr(exc, "details") else str(exc)
            error = _ERRORS.get(code, InternalError)
            hint = (
                _CREDENTIAL_HINT
                if code in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
                else ""
            )
            raise error(f"{stage}.{method} returned {code.name}: {details}{hint}") from exc

    def reachable(self, stage: str, timeout_s: float) -> bool:
        """Whether ``stage``'s server answers a health check on this transport's channel
        (a TLS handshake that fails, for a certificate issued for another name, does not)."""
        from grpc_health.v1 import health_pb2, health_pb2_grpc

        self._stub(stage)  # opens the channel
        with self._lock:
            channel = self._channels[self.addresses[stage]]
        try:
            health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=timeout_s
            )
        except grpc.RpcError:
            return False
        return True

    def close(self) -> None:
        with self._lock:
            for channel in self._channels.values():
                channel.close()
            self._channels.clear()
            self._stubs.clear()
