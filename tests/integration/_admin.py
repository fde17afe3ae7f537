"""An admin credential for tests that write the KB through a server (KB changes always
need one, loopback included)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

__all__ = ["ADMIN_TOKEN", "as_admin"]

ADMIN_TOKEN = "test-admin-token-0123456789abcdef"
"""Give it to the server as ``server.auth_token`` (an ``admin`` credential)."""


class _Bearer(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):  # type: ignore[misc]
    def _with_token(self, details: Any) -> Any:
        metadata = [*(details.metadata or ()), ("authorization", f"Bearer {ADMIN_TOKEN}")]
        return details._replace(metadata=metadata)

    def intercept_unary_unary(
        self, continuation: Callable[[Any, Any], Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)

    def intercept_unary_stream(
        self, continuation: Callable[[Any, Any], Any], details: Any, request: Any
    ) -> Any:
        return continuation(self._with_token(details), request)


def as_admin(channel: grpc.Channel) -> grpc.Channel:
    """``channel`` with the admin token on every call."""
    return grpc.intercept_channel(channel, _Bearer())
