"""Who is calling, and may they: the check every Tribunal method passes first.

:func:`authorize` reads ``authorization: Bearer <token>`` from a call's metadata, finds
the credential (:class:`~._credentials.CredentialStore`) and checks its role against
the method's (:data:`~._roles.METHOD_ROLES`): UNAUTHENTICATED without a valid
credential, PERMISSION_DENIED when the role is too weak. The gRPC servers run it in
:class:`AuthInterceptor`; Serve applications in their method wrapper
(:mod:`tribunal.deploy`). Health and reflection stay open for probes.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from .._errors import PermissionDeniedError, TribunalError, UnauthenticatedError
from ._credentials import CredentialStore, Role
from ._handlers import INFRASTRUCTURE_PREFIXES, Behavior, HandlerInterceptor, rewrap_handler
from ._metrics import GRPC_REQUESTS
from ._roles import required_role
from ._status import abort_with_error

__all__ = ["OPEN_PREFIXES", "AuthInterceptor", "Caller", "authorize", "bearer_token", "caller_of"]

OPEN_PREFIXES = INFRASTRUCTURE_PREFIXES
"""Methods anyone may call: Kubernetes probes and grpcurl's discovery."""

_SEND = "send metadata 'authorization: Bearer <token>' with a current credential's token"


@dataclass(frozen=True)
class Caller:
    """Who made a call: the credential's name and role (``unauthenticated`` when the
    server checks no credential)."""

    name: str
    role: Role


UNCHECKED = Caller("unauthenticated", Role.ADMIN)
"""The caller of a server that checks no credential (loopback development only)."""


def bearer_token(metadata: Iterable[tuple[str, Any]] | None) -> str | None:
    """The token of an ``authorization: Bearer <token>`` entry, or None."""
    for key, value in metadata or ():
        if key.lower() != "authorization":
            continue
        text = value.decode() if isinstance(value, bytes) else str(value)
        scheme, _, token = text.strip().partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
        return None
    return None


def authorize(
    credentials: CredentialStore | None, method: str, metadata: Iterable[tuple[str, Any]] | None
) -> Caller:
    """The caller of ``method`` (``/tribunal.v1.RetrievalService/Upsert``), if allowed.

    Raises:
        UnauthenticatedError: no token, or one no credential has.
        PermissionDeniedError: the credential's role may not call ``method``.
    """
    if credentials is None:
        return UNCHECKED
    token = bearer_token(metadata)
    if token is None:
        raise UnauthenticatedError(f"this server requires a credential: {_SEND}")
    credential = credentials.authenticate(token)
    if credential is None:
        raise UnauthenticatedError(
            f"the bearer token is not a valid credential (unknown, or rotated out): {_SEND}"
        )
    needed = required_role(method)
    if not credential.role.allows(needed):
        name = method.rsplit("/", 1)[-1]
        raise PermissionDeniedError(
            f"credential {credential.name!r} has the {credential.role.value} role; {name} "
            f"needs an {needed.value} credential"
        )
    return Caller(credential.name, credential.role)


# The caller of each call in progress, by its context (the work runs on another thread
# than the one that checked the credential, so a context variable would not reach it).
_CALLERS: weakref.WeakKeyDictionary[Any, Caller] = weakref.WeakKeyDictionary()


def caller_of(context: Any) -> Caller:
    """Who made the call ``context`` belongs to (:data:`UNCHECKED` on a server that
    checks no credential, or outside a call)."""
    try:
        return _CALLERS.get(context, UNCHECKED)
    except TypeError:  # a context that cannot be weakly referenced
        return UNCHECKED


class AuthInterceptor(HandlerInterceptor):
    """Refuses calls without an allowed credential (outermost interceptor): the refusal
    costs no admission slot and runs no validation."""

    def __init__(self, service: str, credentials: CredentialStore) -> None:
        self.service = service
        self.credentials = credentials

    exempt = OPEN_PREFIXES

    def intercept(
        self, handler: Any, method: str, handler_call_details: grpc.HandlerCallDetails
    ) -> Any:
        try:
            caller = authorize(self.credentials, method, handler_call_details.invocation_metadata)
        except TribunalError as error:
            GRPC_REQUESTS.labels(self.service, method.rsplit("/", 1)[-1], error.code.value).inc()
            refuse, refuse_stream = _refuse(error), _refuse_stream(error)
            return rewrap_handler(handler, unary=lambda _: refuse, stream=lambda _: refuse_stream)
        return rewrap_handler(
            handler,
            unary=lambda behavior: _as(caller, behavior),
            stream=lambda behavior: _as_stream(caller, behavior),
        )


def _refuse(error: TribunalError) -> Behavior:
    def refuse(_request: Any, context: grpc.ServicerContext) -> Any:
        abort_with_error(context, error)

    return refuse


def _refuse_stream(error: TribunalError) -> Behavior:
    def refuse(_request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        abort_with_error(context, error)
        yield  # pragma: no cover - a generator, for the streaming handler's shape

    return refuse


def _as(caller: Caller, behavior: Behavior) -> Behavior:
    def call(request: Any, context: grpc.ServicerContext) -> Any:
        _CALLERS[context] = caller
        return behavior(request, context)

    return call


def _as_stream(caller: Caller, behavior: Behavior) -> Behavior:
    def call(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
        _CALLERS[context] = caller
        yield from behavior(request, context)

    return call
