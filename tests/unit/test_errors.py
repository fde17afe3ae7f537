"""The error hierarchy and its one mapping to gRPC status codes."""

from __future__ import annotations

import logging

import grpc
import pytest
from tribunal.core import (
    ConfigError,
    DeadlineExceededError,
    ErrorCode,
    FailedPreconditionError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    TribunalError,
    UnavailableError,
)
from tribunal.core._errors import ModelIntegrityError, ModelNotInstalledError
from tribunal.core.server import status_for
from tribunal.core.server._status import STATUS_BY_ERROR_CODE, abort_with_error


def test_every_error_code_has_a_status() -> None:
    assert set(STATUS_BY_ERROR_CODE) == set(ErrorCode)


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (InvalidArgumentError("top_k must be 1..100"), grpc.StatusCode.INVALID_ARGUMENT),
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


def test_a_misconfigured_server_is_failed_precondition_and_keeps_its_settings_to_itself(
    caplog: pytest.LogCaptureFixture,
) -> None:
    error = ConfigError(
        "invalid setting ensemble.artifact_path = '/srv/secret/artifact': not a folder "
        "(set it in tiny.yaml or TRIBUNAL_ENSEMBLE__ARTIFACT_PATH)",
        field="ensemble.artifact_path",
    )
    assert isinstance(error, FailedPreconditionError)
    with caplog.at_level(logging.ERROR, logger="tribunal.core.server._status"):
        status, message = status_for(error)
    assert status is grpc.StatusCode.FAILED_PRECONDITION
    assert message.startswith("the server is misconfigured (id ")
    for detail in ("/srv/secret", "ensemble.artifact_path", "TRIBUNAL_", "tiny.yaml"):
        assert detail not in message
    # The operator finds the detail in the log under the id the caller was given.
    error_id = message.split("(id ")[1].split(")")[0]
    [record] = [r for r in caplog.records if getattr(r, "error_id", None) == error_id]
    assert record.exc_info is not None
    assert record.exc_info[1] is error
    assert getattr(record, "field", None) == "ensemble.artifact_path"


class _RecordingContext:
    """Just the part of ``grpc.ServicerContext`` that ``abort_with_error`` uses."""

    status: grpc.Status | None = None

    def abort_with_status(self, status: grpc.Status) -> None:
        self.status = status
        raise RuntimeError("aborted")


def _aborted_with(error: BaseException) -> grpc.Status:
    context = _RecordingContext()
    with pytest.raises(RuntimeError, match="aborted"):
        abort_with_error(context, error)  # type: ignore[arg-type]
    assert context.status is not None
    return context.status


def test_field_details_go_to_callers_for_their_own_mistakes_only() -> None:
    bad_request = _aborted_with(InvalidArgumentError("empty", field="pairs[2].premise"))
    assert bad_request.code is grpc.StatusCode.INVALID_ARGUMENT
    details = dict(bad_request.trailing_metadata)["grpc-status-details-bin"]
    assert b"pairs[2].premise" in details
    misconfigured = _aborted_with(ConfigError("bad port 99999", field="server.port"))
    assert misconfigured.code is grpc.StatusCode.FAILED_PRECONDITION
    assert "server.port" not in misconfigured.details
    assert b"server.port" not in dict(misconfigured.trailing_metadata)["grpc-status-details-bin"]
