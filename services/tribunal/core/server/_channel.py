"""The one way Tribunal dials a gRPC server: message limits, TLS when a CA is given, and
never a credential in plaintext beyond this machine.

Every outgoing client (the gateway to its stages, retrieval to the entailment service,
a bulk label job to a remote gateway, ``tribunal ask``) opens its channel here:

- with ``tls_ca`` (PEM bytes or a file), a TLS channel that checks the server's
  certificate against it (for ``server_name`` when the certificate names another host);
- without it, a plaintext channel — which :func:`open_channel` refuses when the caller
  will send a bearer token (``sends_credentials``) and the address is not loopback:
  the token would cross the network readable by anyone on the path;
- ``retried`` methods (full names, :data:`RETRIED_READS`) are sent again on UNAVAILABLE,
  with backoff, within the call's own deadline: a replica being replaced or a proxy
  routing around a lost node answers UNAVAILABLE before any work is done, and the next
  try reaches a live one. gRPC's own retry support (the channel's service config) does
  it, and never after a response has started. Only calls that are safe to repeat belong
  there.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from .._errors import ConfigError
from ._exposure import is_loopback

__all__ = ["RETRIED_READS", "bearer_metadata", "host_of", "open_channel", "retry_service_config"]

RETRIED_READS: tuple[str, ...] = ("/tribunal.v1.GatewayService/Answer",)
"""Calls a client may send again when the server was unavailable: ``Answer`` reads the
KB and decides (a repeat at worst audits the decision twice). ``Label`` is not among
them (it may queue an item for review), nor is any write."""

_MAX_ATTEMPTS = 5
"""Tries of a retried call, the first included (gRPC caps it at 5)."""


def retry_service_config(methods: Sequence[str]) -> str:
    """The channel's service config retrying ``methods`` (``/package.Service/Method``) on
    UNAVAILABLE: up to :data:`_MAX_ATTEMPTS` tries, backoff 0.2 s doubling to 2 s (with
    gRPC's jitter), every try within the call's deadline."""
    names = []
    for method in methods:
        service, _, name = method.strip("/").partition("/")
        if not service or not name or "/" in name:
            raise ValueError(f"{method!r} is not a full method name (/package.Service/Method)")
        names.append({"service": service, "method": name})
    policy = {
        "maxAttempts": _MAX_ATTEMPTS,
        "initialBackoff": "0.2s",
        "maxBackoff": "2s",
        "backoffMultiplier": 2,
        "retryableStatusCodes": ["UNAVAILABLE"],
    }
    return json.dumps({"methodConfig": [{"name": names, "retryPolicy": policy}]})


def host_of(address: str) -> str:
    """The host of a ``host:port`` target (``[::1]:50051`` -> ``::1``; ``unix:`` targets
    are local: ``localhost``)."""
    if address.startswith("unix:"):
        return "localhost"
    target = address.split("///", 1)[-1]  # dns:///host:port
    if target.startswith("["):
        return target[1 : target.find("]")]
    return target.rsplit(":", 1)[0] if target.count(":") == 1 else target


def bearer_metadata(token: str | None) -> tuple[tuple[str, str], ...] | None:
    """``authorization: Bearer <token>`` call metadata, or None without a token."""
    return (("authorization", f"Bearer {token}"),) if token else None


def open_channel(
    address: str,
    *,
    tls_ca: bytes | Path | None = None,
    server_name: str = "",
    sends_credentials: bool = False,
    max_message_bytes: int | None = None,
    what: str = "the server",
    retried: Sequence[str] = (),
) -> grpc.Channel:
    """A channel to ``address``; ``retried`` methods are sent again on UNAVAILABLE
    (:func:`retry_service_config`).

    Raises:
        ConfigError: credentials would be sent in plaintext to a non-loopback address,
            or ``tls_ca`` names no readable file.
    """
    options: list[tuple[str, Any]] = []
    if max_message_bytes is not None:
        options += [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
        ]
    if retried:
        options += [
            ("grpc.enable_retries", 1),
            ("grpc.service_config", retry_service_config(retried)),
        ]
    if tls_ca is None:
        if sends_credentials and not is_loopback(host_of(address)):
            raise ConfigError(
                f"refusing to send a credential in plaintext to {what} at {address}: give "
                "its TLS CA (a --tls-ca option, gateway.stage_tls_ca_file, "
                "retrieval.verifier_tls_ca_file) or dial a loopback address",
                field="tls_ca",
            )
        return grpc.insecure_channel(address, options=options)
    if isinstance(tls_ca, bytes):
        root_certificates = tls_ca
    else:
        try:
            root_certificates = tls_ca.read_bytes()
        except OSError as exc:
            raise ConfigError(
                f"cannot read the TLS CA {tls_ca}: {exc.strerror}", field="tls_ca"
            ) from exc
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    credentials = grpc.ssl_channel_credentials(root_certificates=root_certificates)
    return grpc.secure_channel(address, credentials, options=options)
