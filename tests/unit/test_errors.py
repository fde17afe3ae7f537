"""The error hierarchy and its one mapping to gRPC status codes."""

from __future__ import annotations

import grpc
import pytest
from tribunal.core import (
    ConfigError,
    DeadlineExceededError,
    ErrorCode,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    ModelIntegrityError,
    ModelNotInstalledError,
    NotFoundError,
    ResourceExhaustedError,
    TribunalError,
    UnavailableError,
)
from tribunal.core.server import STATUS_BY_ERROR_CODE, status_for


def test_every_error_code_has_a_status() -> None:
    assert set(STATUS_BY_ERROR_CODE) == set(ErrorCode)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidArgumentError("top_k must be 1..100"), grpc.StatusCode.INVALID_ARGUMENT),
        (ConfigError("bad port", field="server.port"), grpc.StatusCode.INVALID_ARGUMENT),
        (NotFoundError("no collection 'faq'"), grpc.StatusCode.NOT_FOUND),
        (FailedPreconditionError("index not built"), grpc.StatusCode.FAILED_PRECONDITION),
        (
            ModelNotInstalledError("run tribunal models install"),
            grpc.StatusCode.FAILED_PRECONDITION,
        ),
        (ResourceExhaustedError("batch of 999 > 64"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (DeadlineExceededError("retrieval took 2.1 s"), grpc.StatusCode.DEADLINE_EXCEEDED),
        (UnavailableError("entailment is down"), grpc.StatusCode.UNAVAILABLE),
    ],
)
def test_caller_errors_keep_their_message(error: TribunalError, status: grpc.StatusCode) -> None:
    assert status_for(error) == (status, error.message)


@pytest.mark.parametrize(
    "error",
    [
        InternalError("index file /srv/x is corrupt"),
        ModelIntegrityError("sha mismatch"),
        KeyError("secret-key"),
        ZeroDivisionError("division by zero"),
    ],
)
def test_internal_and_unexpected_errors_are_sanitized(error: BaseException) -> None:
    status, message = status_for(error)
    assert status is grpc.StatusCode.INTERNAL
    assert message.startswith("internal error (id ")
    assert str(error) not in message


def test_field_is_kept() -> None:
    error = InvalidArgumentError("empty", field="pairs[2].premise")
    assert error.field == "pairs[2].premise"
    assert str(error) == "empty"
