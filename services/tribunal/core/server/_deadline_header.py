"""A call's deadline carried in metadata, for the hops where gRPC's own does not cross.

gRPC sends a client's deadline as the ``grpc-timeout`` header, which each server reads
for itself and never hands on. Ray Serve's gRPC proxy is such a server: it answers the
client, then calls the replica through a Serve handle with no deadline at all, so a
gateway behind it would spend its own ``gateway.deadline_s`` on a call whose client gave
up long before (a stage replica lost with its node holds a request until a replacement
starts, tens of seconds). Tribunal's channels therefore also send the time left as
``tribunal-deadline-ms`` metadata, which the proxy passes through and the gateway
replica turns back into a deadline (:func:`deadline_from_metadata`), so it falls back,
naming the late stage, while the client still waits for the answer.

A client that sends no header gets ``gateway.deadline_s`` on the Serve path, as before.
"""

from __future__ import annotations

import collections
import math
import time
from collections.abc import Callable, Iterable
from typing import Any

import grpc

from .._errors import InvalidArgumentError

__all__ = ["DEADLINE_METADATA", "DeadlineMetadataInterceptor", "deadline_from_metadata"]

DEADLINE_METADATA = "tribunal-deadline-ms"
"""Milliseconds the caller still waits, as a decimal integer (1 to 3,600,000)."""

_MAX_MS = 3_600_000
# What the proxy hop and building the reply take, kept back from the caller's time so
# the gateway's answer (an ACCEPT or a FALLBACK naming the late stage) arrives in time.
_MARGIN_S = 0.25
_MARGIN_SHARE = 0.05


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    pass


class DeadlineMetadataInterceptor(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[type-arg]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[type-arg]
):
    """Adds ``tribunal-deadline-ms`` to every call that has a timeout."""

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        timeout = details.timeout
        if timeout is None or not math.isfinite(timeout) or timeout <= 0:
            return details
        milliseconds = max(1, min(_MAX_MS, int(timeout * 1000)))
        metadata = [m for m in (details.metadata or ()) if m[0] != DEADLINE_METADATA]
        metadata.append((DEADLINE_METADATA, str(milliseconds)))
        return _CallDetails(
            details.method,
            details.timeout,
            metadata,
            details.credentials,
            getattr(details, "wait_for_ready", None),
            getattr(details, "compression", None),
        )

    def intercept_unary_unary(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        return continuation(self._details(client_call_details), request)

    def intercept_unary_stream(
        self, continuation: Callable[..., Any], client_call_details: Any, request: Any
    ) -> Any:
        return continuation(self._details(client_call_details), request)


def deadline_from_metadata(
    metadata: Iterable[tuple[str, Any]], *, received_at: float | None = None
) -> float | None:
    """Seconds the gateway may spend on a call whose metadata may carry
    ``tribunal-deadline-ms`` (None: the header is absent).

    The caller's time less a margin for the way back (a quarter second and 5%), and less
    what has passed since ``received_at`` (``time.monotonic()``), never below 0.

    Raises:
        InvalidArgumentError: the header is not an integer from 1 to 3,600,000.
    """
    values = [value for key, value in metadata if key == DEADLINE_METADATA]
    if not values:
        return None
    raw = values[-1]
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else str(raw)
    if not text.isdigit() or not 1 <= int(text) <= _MAX_MS:
        raise InvalidArgumentError(
            f"metadata {DEADLINE_METADATA} must be the milliseconds the caller waits, an "
            f"integer from 1 to {_MAX_MS}; got {text[:32]!r}",
            field=DEADLINE_METADATA,
        )
    seconds = int(text) / 1000.0
    left = seconds - _MARGIN_S - _MARGIN_SHARE * seconds
    if received_at is not None:
        left -= time.monotonic() - received_at
    return max(0.0, left)
