"""The deadline of the request being served, for work that runs long.

The gRPC runtime opens a :func:`request_scope` around each call's work (which runs on
a worker thread, not on the thread that received the call). Long loops in domain code
call :func:`check_deadline` between steps: once the caller's deadline has passed, or
the caller has gone, the next check raises :class:`DeadlineExceededError`, so work
nobody waits for any more stops instead of running to the end. Outside a scope (the
CLI, tests, batch jobs) there is no deadline and the checks do nothing.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import threading
import time
from collections.abc import Iterator

from ._errors import DeadlineExceededError

__all__ = ["RequestBudget", "check_deadline", "request_scope", "time_left"]

# gRPC reports a call without a deadline as hundreds of years away: treat as none.
_NO_DEADLINE_S = 10 * 365 * 86_400.0


class RequestBudget:
    """One request's deadline (monotonic seconds, or None) and whether it was abandoned.

    Args:
        seconds: Time the caller gave the request; None (or gRPC's "infinite", a huge
            number): no deadline.
    """

    def __init__(self, seconds: float | None) -> None:
        unbounded = seconds is None or not math.isfinite(seconds) or seconds > _NO_DEADLINE_S
        self.deadline = None if unbounded else time.monotonic() + float(seconds or 0.0)
        self._abandoned = threading.Event()
        self.reason = ""

    def abandon(self, reason: str) -> None:
        """Nobody waits for the result any more (deadline passed, caller cancelled)."""
        self.reason = reason
        self._abandoned.set()

    @property
    def abandoned(self) -> bool:
        return self._abandoned.is_set()

    def time_left(self) -> float | None:
        """Seconds until the deadline (<= 0 once passed); None without a deadline."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def check(self, what: str = "") -> None:
        """Raise DeadlineExceededError when the request is abandoned or out of time."""
        left = self.time_left()
        if self.abandoned or (left is not None and left <= 0):
            why = self.reason or "the request's deadline passed"
            raise DeadlineExceededError(f"{why}; stopped {what or 'the work'} before finishing")


_CURRENT: contextvars.ContextVar[RequestBudget | None] = contextvars.ContextVar(
    "tribunal_request_budget", default=None
)


@contextlib.contextmanager
def request_scope(budget: RequestBudget) -> Iterator[RequestBudget]:
    """Make ``budget`` the current request's for the code run inside."""
    token = _CURRENT.set(budget)
    try:
        yield budget
    finally:
        _CURRENT.reset(token)


def check_deadline(what: str = "") -> None:
    """Raise :class:`DeadlineExceededError` if the current request is out of time.

    Args:
        what: The work that would be cut short (for the message), e.g. ``"quote 3"``.
    """
    budget = _CURRENT.get()
    if budget is not None:
        budget.check(what)


def time_left() -> float | None:
    """Seconds left to the current request (None: no request deadline)."""
    budget = _CURRENT.get()
    return None if budget is None else budget.time_left()
