"""The one mapping from Tribunal errors to gRPC status codes.

Caller-facing errors keep their message (it says what to fix) and, when the
error names a field, carry a ``google.rpc.BadRequest`` field violation in the
rich status details. Internal errors are reduced to an error id; the details
go to the server log.
"""

from __future__ import annotations

import logging
import uuid
from typing import NoReturn

import grpc
from google.protobuf import any_pb2
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from .._errors import ErrorCode, TribunalError

__all__ = ["STATUS_BY_ERROR_CODE", "abort_with_error", "status_for"]

log = logging.getLogger(__name__)

STATUS_BY_ERROR_CODE: dict[ErrorCode, grpc.StatusCode] = {
    ErrorCode.INVALID_ARGUMENT: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorCode.FAILED_PRECONDITION: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.RESOURCE_EXHAUSTED: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ErrorCode.DEADLINE_EXCEEDED: grpc.StatusCode.DEADLINE_EXCEEDED,
    ErrorCode.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.INTERNAL: grpc.StatusCode.INTERNAL,
}


def status_for(error: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status code and caller-safe message for any exception."""
    if isinstance(error, TribunalError) and error.code is not ErrorCode.INTERNAL:
        return STATUS_BY_ERROR_CODE[error.code], error.message
    error_id = uuid.uuid4().hex[:12]
    log.error(
        "internal error",
        exc_info=(type(error), error, error.__traceback__),
        extra={"error_id": error_id},
    )
    return grpc.StatusCode.INTERNAL, f"internal error (id {error_id}); see the server log"


def abort_with_error(context: grpc.ServicerContext, error: BaseException) -> NoReturn:
    """Abort the call with the mapped status (and field details when known)."""
    code, message = status_for(error)
    status = status_pb2.Status(code=code.value[0], message=message)
    field = getattr(error, "field", None)
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
