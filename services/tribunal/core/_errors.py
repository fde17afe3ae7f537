"""The Tribunal exception hierarchy.

Domain code raises these; it never imports grpc. Each class carries an
:class:`ErrorCode`, and :mod:`tribunal.core.server` maps codes to gRPC status
codes in one table. Messages are shown to callers, so they say what to fix;
the messages of classes with ``private = True`` (:class:`InternalError`, and
:class:`ConfigError`, which names the server's own settings) go to the server log,
and callers get a generic one with an error id.

::

    TribunalError
    ├── InvalidArgumentError      the request is wrong; the message says how
    ├── NotFoundError             a named thing (collection, entry) is absent
    ├── FailedPreconditionError   the system is not in a state to do it
    │   ├── ConfigError           a setting is wrong; names the field (private)
    │   └── ModelNotInstalledError
    ├── ResourceExhaustedError    a size or rate limit was hit
    │   └── PromptTooLongError    a prompt exceeds llm.max_prompt_tokens (tribunal.core.llm)
    ├── DeadlineExceededError     the request ran past its deadline
    ├── UnauthenticatedError      no valid credential came with the call
    ├── PermissionDeniedError     the credential's role may not do this
    ├── UnavailableError          a dependency is down or not ready; retry
    └── InternalError             a bug or broken invariant (private)
        ├── ModelIntegrityError   a model file's sha256 does not match
        └── MalformedOutputError  LLM output failed its schema after the retries
                                  (tribunal.core.llm)
"""

from __future__ import annotations

import enum
from typing import ClassVar

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
    "PermissionDeniedError",
    "ResourceExhaustedError",
    "TribunalError",
    "UnauthenticatedError",
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
    UNAUTHENTICATED = "UNAUTHENTICATED"
    PERMISSION_DENIED = "PERMISSION_DENIED"


class TribunalError(Exception):
    """Base of every error Tribunal raises on purpose.

    Args:
        message: What went wrong and, for caller errors, what to change.
        field: The request or settings field at fault, when there is one
            (dotted path, e.g. ``"pairs[3].premise"``).
    """

    code: ClassVar[ErrorCode] = ErrorCode.INTERNAL
    private: ClassVar[bool] = False
    """True: the message describes the server, not the request; callers get a generic
    message with an error id, and the server log gets this one."""
    public_summary: ClassVar[str] = "request failed"
    """What callers are told instead of a private message."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return self.message


class InvalidArgumentError(TribunalError):
    """The request is malformed or out of range."""

    code = ErrorCode.INVALID_ARGUMENT


class NotFoundError(TribunalError):
    """A named resource does not exist."""

    code = ErrorCode.NOT_FOUND


class FailedPreconditionError(TribunalError):
    """The operation needs a state the system is not in."""

    code = ErrorCode.FAILED_PRECONDITION


class ConfigError(FailedPreconditionError):
    """A setting (profile YAML or ``TRIBUNAL_*`` variable) or an artifact it names is invalid.

    The server cannot do the work until an operator fixes its configuration, so the
    request fails FAILED_PRECONDITION; the message (which names the setting, a path or a
    variable) is for the operator, and is logged rather than sent to callers. On the
    command line it is printed as is.
    """

    private = True
    public_summary = "the server is misconfigured"


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


class UnauthenticatedError(TribunalError):
    """The call carried no credential, or one that is not valid (any more)."""

    code = ErrorCode.UNAUTHENTICATED


class PermissionDeniedError(TribunalError):
    """The caller's credential is valid but its role may not make this call."""

    code = ErrorCode.PERMISSION_DENIED


class InternalError(TribunalError):
    """A bug or a broken invariant; details go to the logs, not the caller."""

    code = ErrorCode.INTERNAL
    private = True
    public_summary = "internal error"


class ModelIntegrityError(InternalError):
    """An assembled model file does not have the pinned sha256."""
