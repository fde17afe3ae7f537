"""Serve's gRPC proxy on loopback and behind (mutual) TLS: a Ray worker setup hook.

Serve 2.60 binds its gRPC proxy, and each replica's own gRPC server, to ``[::]`` (every
interface) in plaintext, with no option to change either. :func:`configure_serve_grpc`
runs in every Ray worker before any Serve actor starts and patches the two places
that bind, as the environment asks:

- ``TRIBUNAL_GRPC_PROXY_LOOPBACK=1``: ``[::]:PORT`` becomes ``127.0.0.1:PORT`` (a local
  ``tribunal serve deploy``; Kubernetes pods listen on their own address and the
  NetworkPolicy decides who reaches them);
- ``TRIBUNAL_GRPC_PROXY_TLS_CERT`` and ``..._KEY`` (PEM files): the proxy serves TLS with
  that certificate; with ``..._CLIENT_CA`` it also requires a client certificate that CA
  signed (mutual TLS) and refuses every other client in the handshake. The replicas'
  own gRPC servers are left to Ray: they follow ``RAY_USE_TLS`` (Ray's mutual TLS).

A local deployment names the hook in its ``runtime_env``; the Helm chart sets Ray's
worker hook variable on its pods, so the workers of a KubeRay cluster run it too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import grpc

__all__ = [
    "LOOPBACK_ENV",
    "TLS_CERT_ENV",
    "TLS_CLIENT_CA_ENV",
    "TLS_KEY_ENV",
    "configure_serve_grpc",
    "loopback_address",
    "proxy_server_credentials",
]

LOOPBACK_ENV = "TRIBUNAL_GRPC_PROXY_LOOPBACK"
TLS_CERT_ENV = "TRIBUNAL_GRPC_PROXY_TLS_CERT"
TLS_KEY_ENV = "TRIBUNAL_GRPC_PROXY_TLS_KEY"
TLS_CLIENT_CA_ENV = "TRIBUNAL_GRPC_PROXY_TLS_CLIENT_CA"

_EVERY_INTERFACE = "[::]:"
_MARK = "__tribunal_serve_grpc__"


def loopback_address(address: str) -> str:
    """``[::]:9000`` -> ``127.0.0.1:9000``; any other address unchanged."""
    if address.startswith(_EVERY_INTERFACE):
        return "127.0.0.1:" + address[len(_EVERY_INTERFACE) :]
    return address


def proxy_server_credentials(
    environ: Mapping[str, str] = os.environ,
) -> grpc.ServerCredentials | None:
    """The proxy's TLS credentials the environment names (None: plaintext).

    Raises:
        ValueError: the certificate is named without its key (or the reverse), or a
            client CA without a certificate; or a named file cannot be read.
    """
    cert, key, client_ca = (
        environ.get(name, "") for name in (TLS_CERT_ENV, TLS_KEY_ENV, TLS_CLIENT_CA_ENV)
    )
    if not cert and not key:
        if client_ca:
            raise ValueError(f"{TLS_CLIENT_CA_ENV} needs {TLS_CERT_ENV} and {TLS_KEY_ENV}")
        return None
    if not (cert and key):
        raise ValueError(f"{TLS_CERT_ENV} and {TLS_KEY_ENV} go together")
    try:
        chain = Path(cert).read_bytes()
        private_key = Path(key).read_bytes()
        roots = Path(client_ca).read_bytes() if client_ca else None
    except OSError as exc:
        raise ValueError(
            f"cannot read the gRPC proxy's TLS file {exc.filename}: {exc.strerror}"
        ) from exc
    return grpc.ssl_server_credentials(
        [(private_key, chain)], root_certificates=roots, require_client_auth=roots is not None
    )


def _proxy_binder(
    original: Callable[[Any, str], Any], loopback: bool, credentials: grpc.ServerCredentials | None
) -> Callable[[Any, str], Any]:
    def bind(server: Any, address: str) -> Any:
        if loopback:
            address = loopback_address(address)
        if credentials is not None:
            return server.add_secure_port(address, credentials)
        return original(server, address)

    setattr(bind, _MARK, True)
    return bind


def _replica_binder(original: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def bind(server: Any, address: str) -> Any:
        return original(server, loopback_address(address))

    setattr(bind, _MARK, True)
    return bind


def configure_serve_grpc() -> None:
    """Patch Serve's two places that bind ``[::]`` as the environment asks (idempotent)."""
    from ray.serve._private import default_impl, replica

    loopback = os.environ.get(LOOPBACK_ENV, "") == "1"
    credentials = proxy_server_credentials()
    proxy_bind = getattr(default_impl, "add_grpc_address")  # noqa: B009 - Ray's private name
    if not getattr(proxy_bind, _MARK, False) and (loopback or credentials):
        setattr(default_impl, "add_grpc_address", _proxy_binder(proxy_bind, loopback, credentials))  # noqa: B010
    replica_bind = getattr(replica, "add_port_to_grpc_server")  # noqa: B009
    if loopback and not getattr(replica_bind, _MARK, False):
        setattr(replica, "add_port_to_grpc_server", _replica_binder(replica_bind))  # noqa: B010
