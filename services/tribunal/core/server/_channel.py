"""The one way Tribunal dials a gRPC server: message limits, TLS when a CA is given, and
never a credential in plaintext beyond this machine.

Every outgoing client (the gateway to its stages, retrieval to the entailment service,
a bulk label job to a remote gateway, ``tribunal ask``) opens its channel here:

- with ``tls_ca`` (PEM bytes or a file), a TLS channel that checks the server's
  certificate against it (for ``server_name`` when the certificate names another host),
  presenting a client certificate (``tls_cert`` and ``tls_key``) to a server that asks
  for one (mutual TLS: ``tribunal serve deploy``'s proxy, stages with
  ``server.tls_client_ca_file``);
- without it, a plaintext channel — which :func:`open_channel` refuses when the caller
  will send a bearer token (``sends_credentials``) and the address is not loopback:
  the token would cross the network readable by anyone on the path;
- ``retried`` methods (full names, :data:`RETRIED_READS`) are sent again on UNAVAILABLE,
  with backoff, within the call's own deadline: a replica being replaced or a proxy
  routing around a lost node answers UNAVAILABLE before any work is done, and the next
  try reaches a live one. gRPC's own retry support (the channel's service config) does
  it, and never after a response has started. Only calls that are safe to repeat belong
  there.
- every call with a timeout also carries it as ``tribunal-deadline-ms`` metadata
  (:mod:`._deadline_header`), for the gateway behind Ray Serve's proxy, which does not
  pass gRPC's own deadline on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

from .._errors import ConfigError
from ._deadline_header import DeadlineMetadataInterceptor
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


def _pem(value: bytes | Path, what: str) -> bytes:
    if isinstance(value, bytes):
        return value
    try:
        return value.read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"cannot read the TLS {what} {value}: {exc.strerror}", field=f"tls_{what}"
        ) from exc


def open_channel(
    address: str,
    *,
    tls_ca: bytes | Path | None = None,
    tls_cert: bytes | Path | None = None,
    tls_key: bytes | Path | None = None,
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
            a TLS file cannot be read, or a client certificate comes without its key (or
            without ``tls_ca``).
    """
    if (tls_cert is None) != (tls_key is None):
        raise ConfigError(
            "a client certificate and its key go together (--tls-cert with --tls-key)",
            field="tls_cert",
        )
    if tls_cert is not None and tls_ca is None:
        raise ConfigError(
            "a client certificate is for a TLS server: give its CA too (--tls-ca)",
            field="tls_ca",
        )
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
        return grpc.intercept_channel(
            grpc.insecure_channel(address, options=options), DeadlineMetadataInterceptor()
        )
    root_certificates = _pem(tls_ca, "ca")
    if server_name:
        options.append(("grpc.ssl_target_name_override", server_name))
    credentials = grpc.ssl_channel_credentials(
        root_certificates=root_certificates,
        private_key=_pem(tls_key, "key") if tls_key is not None else None,
        certificate_chain=_pem(tls_cert, "cert") if tls_cert is not None else None,
    )
    return grpc.intercept_channel(
        grpc.secure_channel(address, credentials, options=options), DeadlineMetadataInterceptor()
    )
