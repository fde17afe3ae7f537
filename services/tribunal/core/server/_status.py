"""The one mapping from Tribunal errors to gRPC status codes.

Caller-facing errors keep their message (it says what to fix) and, when the
error names a field, carry a ``google.rpc.BadRequest`` field violation in the
rich status details. Private errors (internal ones, and a misconfigured server's
``ConfigError``) keep their status code but reach callers as a generic message with
an error id; the details go to the server log under that id.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import Any, NoReturn

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from .._errors import ErrorCode, InternalError, InvalidArgumentError, TribunalError

__all__ = [
    "STATUS_BY_ERROR_CODE",
    "UndecodableRequest",
    "abort_with_error",
    "status_for",
    "tolerant_deserializer",
]

log = logging.getLogger(__name__)

STATUS_BY_ERROR_CODE: dict[ErrorCode, grpc.StatusCode] = {
    ErrorCode.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorCode.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorCode.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorCode.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.INTERNAL: grpc.StatusCode.INTERNAL,
    ErrorCode.UNAUTHENTICATED: grpc.StatusCode.UNAUTHENTICATED,
    ErrorCode.PERMISSION_DENIED: grpc.StatusCode.PERMISSION_DENIED,
}


def status_for(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status code and caller-safe message for any exception."""
    if isinstance(error, TribunalError) and not error.private:
        return STATUS_BY_ERROR_CODE[error.code], error.message
    if isinstance(error, TribunalError):
        code, summary = STATUS_BY_ERROR_CODE[error.code], error.public_summary
    else:
        code, summary = grpc.StatusCode.INTERNAL, InternalError.public_summary
    error_id = uuid.uuid4().hex[:12]
    log.error(
        summary,
        exc_info=(type(error), error, error.__traceback__),
        extra={"error_id": error_id, "field": getattr(error, "field", None)},
    )
    return code, f"{summary} (id {error_id}); see the server log"


def abort_with_error(context: grpc.ServicerContext, error: BaseException) -> NoReturn:
    """Abort the call with the mapped status (and field details when known)."""
    code, message = status_for(error)
    status = status_pb2.Status(code=code.value[0], message=message)
    field = error.field if isinstance(error, TribunalError) and not error.private else None
    if field and code is grpc.StatusCode.INVALID_ARGUMENT:
        detail = any_pb2.Any()
        detail.Pack(
            error_details_pb2.BadRequest(
                field_violations=[
                    error_details_pb2.BadRequest.FieldViolation(field=field, description=message)
                ]
            )
        )
        status.details.append(detail)
    context.abort_with_status(rpc_status.to_status(status))
    raise AssertionError("unreachable: abort_with_status raises")  # pragma: no cover


class UndecodableRequest:
    """What a request that is not a valid protobuf message of its method's type decodes
    to: the handler turns it into INVALID_ARGUMENT (gRPC itself would answer INTERNAL,
    before any error mapping could run)."""

    __slots__ = ("message_type", "reason", "size")

    def __init__(self, message_type: str, size: int, reason: str) -> None:
        self.message_type = message_type
        self.size = size
        self.reason = reason

    def error(self) -> InvalidArgumentError:
        return InvalidArgumentError(
            f"the request's {self.size} bytes are not a valid {self.message_type} message "
            f"({self.reason}); send a serialized {self.message_type}",
            field="request",
        )


def tolerant_deserializer(
    deserializer: Callable[[bytes], Any] | None, message_type: str
) -> Callable[[bytes], Any] | None:
    """``deserializer``, returning an :class:`UndecodableRequest` instead of raising."""
    if deserializer is None:
        return None

    def decode(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # DecodeError, invalid UTF-8, recursion limit, ...
            return UndecodableRequest(message_type, len(data), type(exc).__name__)

    return decode
