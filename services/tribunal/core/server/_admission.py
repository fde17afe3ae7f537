"""Admission control: what a call must pass before its work starts, and where it runs.

For every Tribunal method (health and reflection are exempt), in order:

1. the request decodes (random bytes are INVALID_ARGUMENT, not gRPC's INTERNAL);
2. every field is within its size limit (:class:`RequestLimits`);
3. its deadline has not passed already;
4. it gets one of ``max_ongoing_requests`` slots, waiting in a queue of at most
   ``max_queued_requests`` calls; beyond that it is refused at once with
   RESOURCE_EXHAUSTED, and a call whose deadline passes while it waits is never started.

The work then runs on a separate pool of ``max_ongoing_requests`` threads, inside a
:func:`~tribunal.core.request_scope` carrying its deadline, while the thread that
received the call waits for it. When the deadline passes (or the caller cancels) the
call answers DEADLINE_EXCEEDED at once and the work is marked abandoned: the next
:func:`~tribunal.core.check_deadline` in it stops it. The threads that receive calls
are never the ones doing the work, so health checks and refusals always find one.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import grpc

from .._deadline import RequestBudget, request_scope
from .._errors import DeadlineExceededError, ResourceExhaustedError
from ._handlers import Behavior, HandlerInterceptor, rewrap_handler
from ._limits import RequestLimits
from ._status import UndecodableRequest, tolerant_deserializer

__all__ = ["Admission", "AdmissionInterceptor"]

# How often a queued call wakes to notice that its caller cancelled.
_QUEUE_POLL_S = 0.25


class Admission:
    """At most ``max_ongoing`` calls at work and ``max_queued`` waiting; thread-safe.

    Args:
        service: For messages.
        max_ongoing: Slots (calls worked on at once).
        max_queued: Calls that may wait for a slot; beyond, calls are refused.
    """

    def __init__(self, service: str, max_ongoing: int, max_queued: int) -> None:
        if max_ongoing < 1 or max_queued < 0:
            raise ValueError("max_ongoing must be >= 1 and max_queued >= 0")
        self.service = service
        self.max_ongoing = max_ongoing
        self.max_queued = max_queued
        self._cond = threading.Condition()
        self.ongoing = 0
        self.queued = 0

    def refuse_if_full(self) -> None:
        """Raise the refusal now when no slot and no room in the queue is left."""
        with self._cond:
            if self.ongoing >= self.max_ongoing and self.queued >= self.max_queued:
                raise self._refusal()

    def _refusal(self) -> ResourceExhaustedError:
        return ResourceExhaustedError(
            f"{self.service} is at capacity ({self.max_ongoing} calls at work, "
            f"{self.max_queued} waiting); retry with backoff, or raise "
            "server.max_ongoing_requests / server.max_queued_requests"
        )

    def enter(self, budget: RequestBudget) -> None:
        """Take a slot, waiting in the queue if needed.

        Raises:
            ResourceExhaustedError: no slot and the queue is full.
            DeadlineExceededError: the deadline passed (or the caller left) while waiting.
        """
        with self._cond:
            if self.ongoing < self.max_ongoing and not self.queued:
                self.ongoing += 1
                return
            if self.queued >= self.max_queued:
                raise self._refusal()
            self.queued += 1
            try:
                while self.ongoing >= self.max_ongoing:
                    left = budget.time_left()
                    if budget.abandoned or (left is not None and left <= 0):
                        raise DeadlineExceededError(
                            f"the deadline passed while the call waited for {self.service} "
                            "(at capacity); it was not started"
                        )
                    wait = _QUEUE_POLL_S if left is None else min(left, _QUEUE_POLL_S)
                    self._cond.wait(wait)
                self.ongoing += 1
            finally:
                self.queued -= 1

    def leave(self) -> None:
        with self._cond:
            self.ongoing -= 1
            self._cond.notify()


def _message_name(deserializer: Callable[[bytes], Any] | None) -> str:
    owner = getattr(deserializer, "__self__", None)  # ``SomeRequest.FromString``
    descriptor = getattr(owner, "DESCRIPTOR", None)
    return str(getattr(descriptor, "full_name", "request"))


class AdmissionInterceptor(HandlerInterceptor):
    """Applies the steps above to every Tribunal method (innermost interceptor).

    Args:
        admission: The slots and the queue.
        workers: Runs the calls' work (``admission.max_ongoing`` threads).
        limits: Field size limits; None checks none (a server of test servicers).
    """

    def __init__(
        self, admission: Admission, workers: ThreadPoolExecutor, limits: RequestLimits | None
    ) -> None:
        self.admission = admission
        self.workers = workers
        self.limits = limits

    def intercept(
        self, handler: Any, method: str, handler_call_details: grpc.HandlerCallDetails
    ) -> Any:
        deserializer = tolerant_deserializer(
            handler.request_deserializer, _message_name(handler.request_deserializer)
        )
        # Tribunal has no client-streaming methods; such a handler is left as it is.
        return rewrap_handler(
            handler,
            unary=self._unary,
            stream=self._stream,
            request_deserializer=deserializer,
            client_streaming=False,
        )

    # -- before the work --------------------------------------------------------------------
    def _admit(self, request: Any, context: grpc.ServicerContext) -> RequestBudget:
        """Steps 1-4; returns the call's budget with a slot taken."""
        if isinstance(request, UndecodableRequest):
            raise request.error()
        self.admission.refuse_if_full()  # before spending time on validation
        if self.limits is not None:
            self.limits.check(request)
        budget = RequestBudget(context.time_remaining())
        left = budget.time_left()
        if left is not None and left <= 0:
            raise DeadlineExceededError("the call's deadline passed before its work started")
        self.admission.enter(budget)
        # Runs when the call ends, however it ends: a cancelled caller abandons the work.
        context.add_callback(lambda: budget.abandon("the caller cancelled the call"))
        return budget

    def _run(self, budget: RequestBudget, work: Callable[[], Any]) -> Any:
        try:
            budget.check("the call")
            with request_scope(budget):
                return work()
        finally:
            self.admission.leave()

    # -- unary responses ----------------------------------------------------------------------
    def _unary(self, behavior: Behavior) -> Behavior:
        def wrapper(request: Any, context: grpc.ServicerContext) -> Any:
            budget = self._admit(request, context)
            try:
                future = self.workers.submit(self._run, budget, lambda: behavior(request, context))
            except BaseException:
                self.admission.leave()
                raise
            return _wait(future, budget)

        return wrapper

    # -- streamed responses ---------------------------------------------------------------------
    def _stream(self, behavior: Behavior) -> Behavior:
        def wrapper(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            budget = self._admit(request, context)
            replies: queue.Queue[tuple[str, Any]] = queue.Queue()

            def produce() -> None:
                try:
                    for reply in behavior(request, context):
                        budget.check("the stream")
                        replies.put(("reply", reply))
                    replies.put(("end", None))
                except BaseException as exc:
                    replies.put(("error", exc))

            try:
                self.workers.submit(self._run, budget, produce)
            except BaseException:
                self.admission.leave()
                raise
            finished = False
            try:
                while True:
                    left = budget.time_left()
                    try:
                        kind, value = replies.get(timeout=None if left is None else max(left, 0))
                    except queue.Empty:
                        raise _deadline_passed(budget) from None
                    if kind == "end":
                        finished = True
                        return
                    if kind == "error":
                        finished = True
                        raise value
                    yield value
            finally:
                if not finished:
                    budget.abandon("the caller stopped reading the stream")

        return wrapper


def _wait(future: Future[Any], budget: RequestBudget) -> Any:
    """The work's result, or DEADLINE_EXCEEDED once the deadline passes (work abandoned)."""
    try:
        return future.result(timeout=budget.time_left())
    except TimeoutError:
        if future.done():
            # Finished as the wait timed out (or raised TimeoutError itself): its own
            # outcome, not the wait's timeout, which would surface as INTERNAL.
            return future.result()
        raise _deadline_passed(budget) from None


def _deadline_passed(budget: RequestBudget) -> DeadlineExceededError:
    budget.abandon("the call's deadline passed")
    return DeadlineExceededError(
        "the call's deadline passed before its work finished; the work was abandoned"
    )
