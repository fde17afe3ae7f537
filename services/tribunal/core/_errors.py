"""The Tribunal exception hierarchy.

Domain code raises these; it never imports grpc. Each class carries an
:class:`ErrorCode`, and :mod:`tribunal.core.server` maps codes to gRPC status
codes in one table. Messages are shown to callers, so they say what to fix;
:class:`InternalError` messages are replaced by a generic one at the edge.

::

    TribunalError
    ├── InvalidArgumentError      the request is wrong; the message says how
    │   └── ConfigError           a setting is wrong; names the field
    ├── NotFoundError             a named thing (collection, entry) is absent
    ├── FailedPreconditionError   the system is not in a state to do it
    │   └── ModelNotInstalledError
    ├── ResourceExhaustedError    a size or rate limit was hit
    │   └── PromptTooLongError    a prompt exceeds llm.max_prompt_tokens (tribunal.core.llm)
    ├── DeadlineExceededError     the request ran past its deadline
    ├── UnavailableError          a dependency is down or not ready; retry
    └── InternalError             a bug or broken invariant
        ├── ModelIntegrityError   a model file's sha256 does not match
        └── MalformedOutputError  LLM output failed its schema after the retries
                                  (tribunal.core.llm)
"""

from __future__ import annotations

import enum

__all__ = [
    "ConfigError",
    "DeadlineExceededError",
    "ErrorCode",
    "FailedPreconditionError",
    "InternalError",
    "InvalidArgumentError",
    "ModelIntegrityError",
    "ModelNotInstalledError",
    "NotFoundError",
    "ResourceExhaustedError",
    "TribunalError",
    "UnavailableError",
]


class ErrorCode(enum.Enum):
    """Transport-neutral error categories (names follow gRPC's status codes)."""

    INVALID_ARGUMENT = "INVALID_ARGUMENT"
    NOT_FOUND = "NOT_FOUND"
    FAILED_PRECONDITION = "FAILED_PRECONDITION"
    RESOURCE_EXHAUSTED = "RESOURCE_EXHAUSTED"
    DEADLINE_EXCEEDED = "DEADLINE_EXCEEDED"
    UNAVAILABLE = "UNAVAILABLE"
    INTERNAL = "INTERNAL"


class TribunalError(Exception):
    """Base of every error Tribunal raises on purpose.

    Args:
        message: What went wrong and, for caller errors, what to change.
        field: The request or settings field at fault, when there is one
            (dotted path, e.g. ``"pairs[3].premise"``).
    """

    code: ErrorCode = ErrorCode.INTERNAL

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(TribunalError):
    """The request is malformed or out of range."""

    code = ErrorCode.INVALID_ARGUMENT


class ConfigError(InvalidArgumentError):
    """A setting (profile YAML or ``TRIBUNAL_*`` variable) is invalid."""


class NotFoundError(TribunalError):
    """A named resource does not exist."""

    code = ErrorCode.NOT_FOUND


class FailedPreconditionError(TribunalError):
    """The operation needs a state the system is not in."""

    code = ErrorCode.FAILED_PRECONDITION


class ModelNotInstalledError(FailedPreconditionError):
    """A model the profile names is not in the model cache."""


class ResourceExhaustedError(TribunalError):
    """A batch, size or rate limit was exceeded."""

    code = ErrorCode.RESOURCE_EXHAUSTED


class DeadlineExceededError(TribunalError):
    """The work could not finish before its deadline."""

    code = ErrorCode.DEADLINE_EXCEEDED


class UnavailableError(TribunalError):
    """A dependency is down or still loading; the call may be retried."""

    code = ErrorCode.UNAVAILABLE


class InternalError(TribunalError):
    """A bug or a broken invariant; details go to the logs, not the caller."""

    code = ErrorCode.INTERNAL


class ModelIntegrityError(InternalError):
    """An assembled model file does not have the pinned sha256."""
