"""Serve's gRPC servers on 127.0.0.1: a Ray worker setup hook for local deployments.

Serve 2.60 binds its gRPC proxy, and each replica's own gRPC server, to ``[::]``
(every interface) with no option to change it. :func:`start_local` names
:func:`bind_loopback` as the ``worker_process_setup_hook`` of a local cluster: it runs
in every Ray worker before any Serve actor starts and rewrites those ``[::]:PORT``
addresses to ``127.0.0.1:PORT``. Kubernetes deployments do not use it (pods listen
on their own address, and the NetworkPolicy decides who reaches them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["bind_loopback", "loopback_address"]

_EVERY_INTERFACE = "[::]:"


def loopback_address(address: str) -> str:
    """``[::]:9000`` -> ``127.0.0.1:9000``; any other address unchanged."""
    if address.startswith(_EVERY_INTERFACE):
        return "127.0.0.1:" + address[len(_EVERY_INTERFACE) :]
    return address


def _on_loopback(bind: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    def bind_on_loopback(server: Any, address: str) -> Any:
        return bind(server, loopback_address(address))

    bind_on_loopback.__tribunal_loopback__ = True  # type: ignore[attr-defined]
    return bind_on_loopback


def bind_loopback() -> None:
    """Patch Serve's two places that bind ``[::]`` (idempotent)."""
    from ray.serve._private import default_impl, replica

    for module, name in ((default_impl, "add_grpc_address"), (replica, "add_port_to_grpc_server")):
        original = getattr(module, name)
        if not getattr(original, "__tribunal_loopback__", False):
            setattr(module, name, _on_loopback(original))
