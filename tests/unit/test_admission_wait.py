"""Waiting on admitted work: a deadline that passes is DEADLINE_EXCEEDED; work that
finishes just as the wait times out returns its own outcome, never the wait's timeout
(which the status mapping would report as INTERNAL)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from tribunal.core import DeadlineExceededError
from tribunal.core._deadline import RequestBudget
from tribunal.core.server._admission import _wait


class _FinishesAsTheWaitTimesOut(Future[Any]):
    """The race, made certain: the first timed wait sets the outcome, then times out."""

    def __init__(self, outcome: Any) -> None:
        super().__init__()
        self._outcome = outcome
        self._raced = False

    def result(self, timeout: float | None = None) -> Any:
        if timeout is not None and not self._raced:
            self._raced = True
            if isinstance(self._outcome, BaseException):
                self.set_exception(self._outcome)
            else:
                self.set_result(self._outcome)
            raise TimeoutError
        return super().result(timeout)


def test_work_finishing_as_the_wait_times_out_returns_its_result() -> None:
    assert _wait(_FinishesAsTheWaitTimesOut("reply"), RequestBudget(5.0)) == "reply"


def test_work_raising_as_the_wait_times_out_raises_its_own_error() -> None:
    with pytest.raises(ValueError, match="the work's own"):
        _wait(_FinishesAsTheWaitTimesOut(ValueError("the work's own")), RequestBudget(5.0))


def test_work_still_running_at_the_deadline_is_deadline_exceeded() -> None:
    budget = RequestBudget(0.01)
    with pytest.raises(DeadlineExceededError, match="deadline passed before its work finished"):
        _wait(Future(), budget)
