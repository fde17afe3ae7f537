"""Servicer functions for Serve's gRPC proxy: ``tribunal.deploy.proxy.<service>``.

Each registry name resolves to a function ``(servicer, server)`` that registers that
service's methods with tolerant request decoding (see :mod:`._proxy`); Serve's
``grpc_options.grpc_servicer_functions`` lists them.
"""

from __future__ import annotations

from ._proxy import ServicerFunction, servicer_adder
from ._registry import SERVICES

__all__: list[str] = []


def __getattr__(name: str) -> ServicerFunction:
    if name in SERVICES:
        return servicer_adder(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
