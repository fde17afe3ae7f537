"""Every Serve application's proto methods behind one wrapper: credentials, then status codes.

Serve's gRPC proxy runs no interceptors, so the checks a :class:`ServiceHost` makes
in its interceptors happen here, in the replica, around each proto-named method:

- **credentials** — a proxy call must carry a credential whose role may call the
  method (:func:`tribunal.core.server.authorize`, the same check and table as the
  gRPC servers): UNAUTHENTICATED or PERMISSION_DENIED otherwise. Calls through a
  ``DeploymentHandle`` (the gateway calling its stages) come from inside the Ray
  cluster, whose own authentication guards them: they carry no ``grpc_context`` and
  are not checked;
- **the request itself** — as :class:`~tribunal.core.server.ServiceHost` checks it
  before any work starts: bytes that are not a valid message (the proxy decodes
  tolerantly, :mod:`._proxy`) are INVALID_ARGUMENT; a message over
  ``server.max_message_bytes`` and every field against the one limit table
  (:class:`~tribunal.core.server.RequestLimits`: INVALID_ARGUMENT for a field too long,
  RESOURCE_EXHAUSTED for a batch too big), handle calls included;
- **unknown methods** — a proto method the application does not serve (another
  service's, routed here by the ``application`` metadata) is UNIMPLEMENTED, as on a
  gRPC server, not Serve's INTERNAL with a traceback;
- **status codes** — an exception raised by the method reaches the client with the
  code the one mapping gives it (``tribunal.core.server.status_for``), not INTERNAL.
  A handle caller gets the exception itself.

:class:`ServeApp` applies the wrapper when a deployment class is defined: every RPC
of the class's proto service must be implemented and each is wrapped, so no
application can forget either check. The method being served learns its caller
from :func:`serve_caller` (the KB change audit records it).

    @serve.deployment(name="retrieval")
    class RetrievalDeployment(ServeApp, service="retrieval"):
        def __init__(self, settings_data):
            settings = Settings(**settings_data)
            super().__init__(settings)
            ...

        async def Upsert(self, request, grpc_context=None): ...
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import inspect
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any, ClassVar

import grpc
from google.protobuf.message import Message

from ..core import InternalError, ResourceExhaustedError, Settings
from ..core.server import Caller, CredentialStore, RequestLimits, Role, authorize, status_for
from ..core.server._status import UndecodableRequest
from ._registry import service

__all__ = ["HANDLE_CALLER", "ServeApp", "grpc_status", "proto_methods", "serve_caller"]

HANDLE_CALLER = Caller("serve-handle", Role.ADMIN)
"""The caller of a ``DeploymentHandle`` call: code inside the Ray cluster."""

_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "tribunal_serve_caller", default=None
)

GUARD_MARK = "__tribunal_guarded__"
"""Attribute every wrapped method carries: the full method path it guards."""

# Proto method names are CamelCase; every other attribute of a deployment is not.
_PROTO_METHOD = re.compile(r"[A-Z][A-Za-z0-9]*")


class UnimplementedMethodError(Exception):
    """A call to a method the application does not serve (UNIMPLEMENTED on the proxy)."""


def serve_caller() -> Caller:
    """Who made the call being served (:data:`HANDLE_CALLER` for a handle call)."""
    return _CALLER.get() or HANDLE_CALLER


@contextmanager
def grpc_status(grpc_context: Any | None) -> Iterator[None]:
    """Re-raise any exception after setting its mapped status on the proxy's context."""
    try:
        yield
    except UnimplementedMethodError:
        raise  # its status is set where it is raised
    except Exception as error:
        if grpc_context is not None:
            code, message = status_for(error)
            grpc_context.set_code(code)
            grpc_context.set_details(message)
        raise


def proto_methods(name: str) -> tuple[str, ...]:
    """The RPC names of registry service ``name`` (``Search``, ``Upsert``, ...), from the
    generated descriptor."""
    return tuple(_request_types(name))


def _request_types(name: str) -> dict[str, str]:
    """RPC name -> full name of its request message, for registry service ``name``."""
    spec = service(name)
    module = importlib.import_module(f"tribunal.v1.{spec.proto}_pb2")
    descriptor = module.DESCRIPTOR.services_by_name[spec.proto_service]
    return {method.name: method.input_type.full_name for method in descriptor.methods}


class ServeApp:
    """Base of every Serve deployment that serves a ``tribunal.v1`` service.

    Subclassing with ``service="<registry name>"`` wraps each RPC the class defines
    (and refuses a class that misses one); ``__init__`` loads the credentials the
    settings name (``server.credentials_file`` / ``server.auth_token``).
    """

    proto_service: ClassVar[str] = ""
    credentials: CredentialStore | None
    request_limits: RequestLimits
    max_message_bytes: int

    def __init_subclass__(cls, *, service: str = "", **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not service:
            # Serve ships a deployment class to its replicas by value: the unpickler makes
            # an empty class first (without the keyword) and then sets the attributes,
            # methods already wrapped. Any other class must name its service.
            if any(callable(value) for name, value in vars(cls).items() if name[0] != "_"):
                raise TypeError(f"{cls.__name__}: subclass ServeApp with service='<registry name>'")
            return
        full_name = _full_name(service)
        request_types = _request_types(service)
        missing = [name for name in request_types if name not in cls.__dict__]
        if missing:
            raise TypeError(f"{cls.__name__} does not implement {full_name} methods {missing}")
        for name, request_type in request_types.items():
            setattr(cls, name, _guard(f"/{full_name}/{name}", request_type, cls.__dict__[name]))
        cls.proto_service = full_name

    def __init__(self, settings: Settings) -> None:
        self.credentials = CredentialStore.from_settings(settings.server)
        self.request_limits = RequestLimits.from_settings(settings)
        self.max_message_bytes = settings.server.max_message_bytes

    def __getattr__(self, name: str) -> Any:
        # Serve looks a call's method up by the name in its gRPC path; a proto method
        # this application lacks gets UNIMPLEMENTED instead of Serve's own error (INTERNAL,
        # with a traceback naming the replica's host and paths).
        if not _PROTO_METHOD.fullmatch(name):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        served = type(self).proto_service or type(self).__name__

        async def unimplemented(request: Any, grpc_context: Any = None) -> Any:
            _refuse_unimplemented(served, name, grpc_context)

        return unimplemented

    def _caller(self, method: str, grpc_context: Any | None) -> Caller:
        if grpc_context is None:
            return HANDLE_CALLER
        if not hasattr(self, "credentials"):
            raise InternalError(
                f"{type(self).__name__}.__init__ did not call ServeApp.__init__: its "
                "credentials are unknown, so no call is let through"
            )
        if self.credentials is None:
            return authorize(None, method, ())
        return authorize(self.credentials, method, grpc_context.invocation_metadata())


def _full_name(name: str) -> str:
    return service(name).full_proto_service


def _refuse_unimplemented(served: str, method: str, grpc_context: Any | None) -> None:
    message = f"this application serves {served}, which has no method {method}"
    if grpc_context is not None:
        grpc_context.set_code(grpc.StatusCode.UNIMPLEMENTED)
        grpc_context.set_details(message)
    raise UnimplementedMethodError(message)


def _admit(app: ServeApp, method: str, request_type: str, request: Any) -> None:
    """The checks a ServiceHost makes before a call's work starts (see the module doc)."""
    if isinstance(request, UndecodableRequest):
        raise request.error()
    if not isinstance(request, Message) or request.DESCRIPTOR.full_name != request_type:
        # Another service's method of the same name, routed here: not served.
        raise UnimplementedMethodError(
            f"{method} takes a {request_type}, not a {type(request).__name__}"
        )
    limits = getattr(app, "request_limits", None)
    if limits is None:
        raise InternalError(
            f"{type(app).__name__}.__init__ did not call ServeApp.__init__: its request "
            "limits are unknown, so no call is let through"
        )
    size = request.ByteSize()
    if size > app.max_message_bytes:
        raise ResourceExhaustedError(
            f"the request has {size} bytes; the limit is {app.max_message_bytes} "
            "(server.max_message_bytes): split it",
            field="request",
        )
    limits.check(request)


@contextmanager
def _serving(
    app: ServeApp,
    method: str,
    request_type: str,
    request: Any,
    grpc_context: Any | None,
    *,
    record: bool,
) -> Iterator[None]:
    """One call: the credential check, the request's checks, the caller recorded
    (``record``), the status mapping."""
    with grpc_status(grpc_context):
        caller = app._caller(method, grpc_context)
        try:
            _admit(app, method, request_type, request)
        except UnimplementedMethodError:
            _refuse_unimplemented(app.proto_service, method.rsplit("/", 1)[-1], grpc_context)
        reset = _CALLER.set(caller) if record else None
        try:
            yield
        finally:
            if reset is not None:
                _CALLER.reset(reset)


def _guard(method: str, request_type: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` with the credential check and the status mapping around it.

    The wrappers reference only module-level names besides ``function``: Serve pickles
    a deployment class by value, and a context variable cannot be pickled.
    """
    if inspect.isasyncgenfunction(function):

        @functools.wraps(function)
        async def stream(
            self: ServeApp, request: Any, grpc_context: Any = None
        ) -> AsyncIterator[Any]:
            # Streams change nothing: the caller is checked, not recorded.
            with _serving(self, method, request_type, request, grpc_context, record=False):
                async for reply in function(self, request, grpc_context):
                    yield reply

        setattr(stream, GUARD_MARK, method)
        return stream
    if not inspect.iscoroutinefunction(function):
        raise TypeError(f"{method}: a Serve method must be async (async def or async generator)")

    @functools.wraps(function)
    async def unary(self: ServeApp, request: Any, grpc_context: Any = None) -> Any:
        with _serving(self, method, request_type, request, grpc_context, record=True):
            return await function(self, request, grpc_context)

    setattr(unary, GUARD_MARK, method)
    return unary
