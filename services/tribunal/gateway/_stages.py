"""Calling a stage: the transport seam, deadlines, bounded retries, failure kinds.

The gateway's pipelines speak protobuf messages to the stages (the registry's
``tribunal.deploy.STAGES``) through a :class:`StageTransport`; which transport
(in-process, remote gRPC, Ray Serve handles) is configuration, so the pipelines
are the same code in every deployment and never import grpc or ray.
"""

from __future__ import annotations

import enum
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..core import DeadlineExceededError, TribunalError, UnavailableError

__all__ = [
    "Deadline",
    "FailureKind",
    "StageError",
    "StageTransport",
    "call_stage",
    "check_probability",
]

log = logging.getLogger(__name__)


class StageTransport(Protocol):
    """Sends one request to one stage and returns its response message.

    Implementations raise Tribunal errors: :class:`UnavailableError` when the stage
    cannot be reached (the only kind retried), :class:`DeadlineExceededError` when
    ``timeout_s`` passed, any other :class:`TribunalError` for a stage-side failure.
    """

    def call(self, stage: str, method: str, request: Any, timeout_s: float) -> Any: ...

    def close(self) -> None: ...


class FailureKind(enum.StrEnum):
    """Why a stage did not deliver; each maps to one fallback reason."""

    ERROR = "STAGE_ERROR"
    TIMEOUT = "STAGE_TIMEOUT"
    MALFORMED = "MALFORMED_RESPONSE"


class StageError(Exception):
    """A stage failed; the pipeline turns it into a fail-closed decision."""

    def __init__(self, stage: str, kind: FailureKind, message: str) -> None:
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.kind = kind
        self.message = message


class Deadline:
    """A request's remaining time, split across the stages still to run."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end = clock() + seconds

    def remaining(self) -> float:
        return max(0.0, self._end - self._clock())

    def budget(
        self, stage: str, later: Sequence[str], shares: Mapping[str, float], cap: float
    ) -> float:
        """This stage's timeout: its share of what is left among itself and ``later``.

        Raises:
            StageError: TIMEOUT when nothing is left.
        """
        remaining = self.remaining()
        if remaining <= 0.0:
            raise StageError(stage, FailureKind.TIMEOUT, "the request deadline passed")
        weights = [shares.get(name, 0.0) for name in (stage, *later)]
        total = sum(weights)
        share = weights[0] / total if total > 0 else 1.0
        return min(cap, remaining * share)


def call_stage(
    transport: StageTransport,
    stage: str,
    method: str,
    request: Any,
    *,
    timeout_s: float,
    retries: int,
    backoff_s: float,
    propagate: tuple[type[TribunalError], ...] = (),
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """One stage call with retries on UNAVAILABLE only, all within ``timeout_s``.

    Raises:
        StageError: every failure, classified, except the error types in
            ``propagate`` (a caller's mistake the stage reported, such as an unknown
            collection), which are re-raised for the client to see.
    """
    started = time.monotonic()
    attempt = 0
    while True:
        left = timeout_s - (time.monotonic() - started)
        if left <= 0.0:
            raise StageError(stage, FailureKind.TIMEOUT, f"no time left after {attempt} tries")
        try:
            return transport.call(stage, method, request, left)
        except UnavailableError as exc:
            delay = backoff_s * 2**attempt
            if attempt >= retries or delay >= timeout_s - (time.monotonic() - started):
                raise StageError(
                    stage, FailureKind.ERROR, f"unavailable after {attempt + 1} tries: {exc}"
                ) from exc
            log.warning("stage unavailable, retrying", extra={"stage": stage, "try": attempt + 1})
            sleep(delay)
            attempt += 1
        except DeadlineExceededError as exc:
            raise StageError(stage, FailureKind.TIMEOUT, str(exc)) from exc
        except propagate:
            raise
        except TribunalError as exc:
            raise StageError(stage, FailureKind.ERROR, f"{exc.code.name}: {exc}") from exc
        except Exception as exc:  # fail closed: a transport bug must not crash the request
            log.exception("stage call raised", extra={"stage": stage})
            raise StageError(stage, FailureKind.ERROR, f"{type(exc).__name__}: {exc}") from exc


def check_probability(stage: str, what: str, value: float) -> float:
    """A probability from a stage, or MALFORMED: the pipeline must not trust it."""
    if not (isinstance(value, float | int) and math.isfinite(value) and 0.0 <= value <= 1.0):
        raise StageError(stage, FailureKind.MALFORMED, f"{what} = {value!r} is not in [0, 1]")
    return float(value)
