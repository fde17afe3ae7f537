"""Status codes for Serve's gRPC proxy: the one error mapping, applied inside replicas.

Serve's proxy runs no interceptors: an exception raised by a deployment method
reaches the client as INTERNAL unless the method set a code on the proxy's
``grpc_context`` first. :func:`grpc_status` does that with the mapping every
``ServiceHost`` uses (``tribunal.core.server.status_for``), so a client sees
INVALID_ARGUMENT with the field message whether it called a service directly or
through Ray Serve. Calls through a ``DeploymentHandle`` carry no context: the
exception itself travels back to the caller unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..core.server._status import status_for

__all__ = ["grpc_status"]


@contextmanager
def grpc_status(grpc_context: Any | None) -> Iterator[None]:
    """Re-raise any exception after setting its mapped status on the proxy's context."""
    try:
        yield
    except Exception as error:
        if grpc_context is not None:
            code, message = status_for(error)
            grpc_context.set_code(code)
            grpc_context.set_details(message)
        raise
