"""What Serve's gRPC proxy registers for each service: the proto's methods, decoding
tolerantly.

Serve's proxy keeps the request deserializer of the servicer function it is given and
replaces the handler with its routing. With the generated ``add_*Servicer_to_server`` a
request that is not a valid message fails in the proxy's own decoding, before any code
of ours runs, and the caller gets UNKNOWN with the decoder's exception text. The
functions here register the same methods with
:func:`~tribunal.core.server.tolerant_deserializer`: such a request reaches the
application as an :class:`~tribunal.core.server.UndecodableRequest`, which the
:class:`~tribunal.deploy.ServeApp` wrapper answers with INVALID_ARGUMENT, as
:class:`~tribunal.core.server.ServiceHost` does.

``grpc_options.grpc_servicer_functions`` names them ``tribunal.deploy.proxy.<service>``
(``ServiceSpec.servicer_function``); that module resolves every registry name on
attribute access, as :mod:`tribunal.deploy.apps` does.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf import message_factory

from ..core.server._status import tolerant_deserializer
from ._registry import service

__all__ = ["ServicerFunction", "register", "servicer_adder"]

ServicerFunction = Callable[[Any, Any], None]


def register(name: str, servicer: Any, server: Any) -> None:
    """Add service ``name``'s methods to ``server``, each calling ``servicer.<Method>``,
    requests decoded tolerantly and replies serialized as the generated code does."""
    spec = service(name)
    module = importlib.import_module(f"tribunal.v1.{spec.proto}_pb2")
    descriptor = module.DESCRIPTOR.services_by_name[spec.proto_service]
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {}
    for method in descriptor.methods:
        request_type = message_factory.GetMessageClass(method.input_type)
        reply_type = message_factory.GetMessageClass(method.output_type)
        decode = tolerant_deserializer(request_type.FromString, method.input_type.full_name)
        behavior = getattr(servicer, method.name)
        if method.client_streaming:
            raise TypeError(
                f"{spec.full_proto_service}/{method.name}: client streams are not served"
            )
        make = (
            grpc.unary_stream_rpc_method_handler
            if method.server_streaming
            else grpc.unary_unary_rpc_method_handler
        )
        handlers[method.name] = make(
            behavior, request_deserializer=decode, response_serializer=reply_type.SerializeToString
        )
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(spec.full_proto_service, handlers),)
    )


def servicer_adder(name: str) -> ServicerFunction:
    """``add_<Service>Servicer_to_server`` for service ``name``, decoding tolerantly."""
    service(name)

    def add(servicer: Any, server: Any) -> None:
        register(name, servicer, server)

    add.__name__ = add.__qualname__ = name
    return add
